#!/bin/sh
# The JavaScript libraries of msgflow's web page (msgflow:web/1,
# export(Path, html)) ship in the repository, in priv/www/vendor, with
# their licenses: the node serves them from priv/, with no network and no
# CDN when the page is used, and a build needs no npm.
#
# `tools/web/vendor.sh' (make vendor) refreshes them from the npm
# registry: the versions tools/web/package-lock.json pins, installed with
# `npm ci' into _build/npm, copied into priv/www/vendor.
# `tools/web/vendor.sh driver' (make test) only installs _build/npm, which
# also holds playwright-core, the browser test's driver; nothing when it is
# there and newer than the lock file.
cd "$(dirname "$0")/../.."
out=priv/www/vendor
npm_dir=_build/npm
lock=tools/web/package-lock.json
if ! command -v npm >/dev/null 2>&1; then
    echo "msgflow: no npm here (make test installs it)" >&2
    exit 1
fi
if [ "$1" = driver ] && [ -d $npm_dir/node_modules ] && [ ! $lock -nt $npm_dir/node_modules ]; then
    exit 0
fi
mkdir -p $npm_dir
cp tools/web/package.json $lock $npm_dir/
echo "msgflow: npm ci of the web page's libraries and the browser test's driver into $npm_dir (log: $npm_dir.log)"
if ! (cd $npm_dir && npm ci --no-audit --no-fund --loglevel=error) >$npm_dir.log 2>&1; then
    echo "msgflow: npm ci failed (see $npm_dir.log)" >&2
    exit 1
fi
touch $npm_dir/node_modules
[ "$1" = driver ] && exit 0
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
rm -rf $out && mv $out.tmp $out
