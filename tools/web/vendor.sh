#!/bin/sh
# Vendors the JavaScript libraries of msgflow's web page (msgflow:web/1,
# export(Path, html)) from the npm registry into priv/www/vendor, with
# their licenses: the versions tools/web/package-lock.json pins, installed
# with `npm ci' into _build/npm (which also holds playwright-core, the
# browser test's driver).  The node serves them from priv/: no network and
# no CDN when the page is used.  Run by rebar3's compile hook; does nothing
# when priv/www/vendor is newer than the lock file.  Without npm, or with
# the registry out of reach, it says so and the page shows which library
# is missing (the build goes on: the tracer does not need them).
cd "$(dirname "$0")/../.."
out=priv/www/vendor
npm_dir=_build/npm
lock=tools/web/package-lock.json
if [ -f $out/.done ] && [ ! $lock -nt $out/.done ] && [ -d $npm_dir/node_modules ]; then
    exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
    echo "msgflow: no npm here: the web page's libraries are not vendored (make deps installs npm)"
    exit 0
fi
mkdir -p $npm_dir
cp tools/web/package.json $lock $npm_dir/
echo "msgflow: vendoring the web page's JavaScript libraries from npm into $out (once; log: $npm_dir.log)"
if ! (cd $npm_dir && npm ci --no-audit --no-fund --loglevel=error) >$npm_dir.log 2>&1; then
    echo "msgflow: npm ci failed (see $npm_dir.log): the web page's libraries are not vendored"
    exit 0
fi
m=$npm_dir/node_modules
rm -rf $out.tmp && mkdir -p $out.tmp
# file in node_modules -> name in vendor/, then each package's license
while read -r src dst; do
    cp "$m/$src" "$out.tmp/$dst" || exit 1
done <<LIST
cytoscape/dist/cytoscape.min.js cytoscape.min.js
cytoscape/LICENSE cytoscape.LICENSE
layout-base/layout-base.js layout-base.js
layout-base/LICENSE layout-base.LICENSE
cose-base/cose-base.js cose-base.js
cose-base/LICENSE cose-base.LICENSE
cytoscape-fcose/cytoscape-fcose.js cytoscape-fcose.js
cytoscape-fcose/LICENSE cytoscape-fcose.LICENSE
mermaid/dist/mermaid.min.js mermaid.min.js
mermaid/LICENSE mermaid.LICENSE
chart.js/dist/chart.umd.min.js chart.umd.min.js
chart.js/LICENSE.md chart.js.LICENSE
LIST
(cd $m && for p in cytoscape layout-base cose-base cytoscape-fcose mermaid chart.js; do
     node -p "require('./$p/package.json').name + ' ' + require('./$p/package.json').version + ' ' + require('./$p/package.json').license"
 done) > $out.tmp/VERSIONS
touch $out.tmp/.done
rm -rf $out && mv $out.tmp $out
