// The browser half of msgflow_web_SUITE: drives Debian's Chromium
// (headless) with playwright-core through msgflow's web page, one step per
// line the suite writes on stdin, and answers each with one JSON line on
// stdout.  Usage: node browser.js URL OUT_DIR   (NODE_PATH: _build/npm/node_modules)
//   open           load URL, wait for the graph: {graph, top, dialogs, images}
//   wait EDGE N    wait until the edge "S\u0000R" (JSON string) counts N: {count, updates}
//   click GROUP    click the group's node on the canvas: {title, members}
//   clickedge [S, R]  click the edge's middle: {title, kinds, chart, pairs}
//   bottlenecks GROUP wait for a group coloured a root, click GROUP: {roots, blocked, chain}
//   marks LABEL    wait for a tick on the time slider labelled LABEL, then choose the
//                  newest bottleneck in the list beside it: {ticks, jump, status, range}
//   range FROM TO  show the history from FROM to TO (ms): {graph, top, status, history}
//   compare HOW [FROM, TO]  compare with (before | hour | day, or the range given): {note, changes}
//   shot NAME      a screenshot OUT_DIR/NAME.png: {file}
//   static FILE    open file://FILE (no server behind it): {graph, top, dialogs, images}
//   quit
'use strict';
const { chromium } = require('playwright-core');
const readline = require('readline');

const [url, outDir] = process.argv.slice(2);
const send = (obj) => process.stdout.write(JSON.stringify(obj) + '\n');

async function waitFor(page, fn, arg, ms) {
  await page.waitForFunction(fn, arg, { timeout: ms || 60000, polling: 100 });
}

async function snapshot(page, dialogs) {
  return page.evaluate((d) => ({
    graph: window.msgflow.graph(),
    top: Array.from(document.querySelectorAll('#top tbody tr')).map((tr) =>
      Array.from(tr.children).map((td) => td.textContent)),
    matrix: Array.from(document.querySelectorAll('#matrix th.row')).map((th) => th.textContent),
    dialogs: d,
    images: document.querySelectorAll('img').length,
    title: document.title,
    error: document.getElementById('error').hidden ? null : document.getElementById('error').textContent
  }), dialogs);
}

(async () => {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu']
  });
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  // the page may load from its node (or its own file) only: anything else
  // is refused and counted
  let external = 0;
  await page.route('**/*', (route) => {
    const u = new URL(route.request().url());
    if (u.protocol === 'file:' || u.protocol === 'data:' || u.hostname === '127.0.0.1') return route.continue();
    external++;
    return route.abort();
  });
  let dialogs = 0;
  const errors = [];
  page.on('dialog', async (d) => { dialogs++; await d.dismiss(); });
  page.on('pageerror', (e) => errors.push(String(e)));
  const rl = readline.createInterface({ input: process.stdin });
  for await (const line of rl) {
    const [cmd, ...rest] = line.split(' ');
    const arg = rest.join(' ');
    try {
      if (cmd === 'open' || cmd === 'static') {
        await page.goto(cmd === 'open' ? url : 'file://' + arg);
        await waitFor(page, () => window.msgflow && window.msgflow.graph() &&
                      window.msgflow.graph().edges.length > 0);
        send(Object.assign(await snapshot(page, dialogs), { pageErrors: errors, external }));
      } else if (cmd === 'wait') {
        const [edge, n] = JSON.parse(arg);
        await waitFor(page, ([e, n]) => {
          const g = window.msgflow.graph();
          return g && g.edges.some((x) => x.s + '\u0000' + x.r === e && x.count === n);
        }, [edge, n]);
        send(await page.evaluate(() => ({ updates: window.msgflow.updates() })));
      } else if (cmd === 'click') {
        const id = JSON.parse(arg);
        const at = await page.evaluate((id) => window.msgflow.position(id), id);
        await page.mouse.click(at.x, at.y);
        await waitFor(page, () => document.querySelector('#details-body table'));
        send(await page.evaluate(() => ({
          title: document.getElementById('details-title').textContent,
          members: Array.from(document.querySelectorAll('#details-body tbody tr')).map((tr) =>
            Array.from(tr.children).map((td) => td.textContent))
        })));
      } else if (cmd === 'bottlenecks') {
        // wait until a group is coloured a root, then click it: its chain
        await waitFor(page, () => window.msgflow.bottlenecks() && window.msgflow.bottlenecks().roots.length > 0);
        const coloured = await page.evaluate(() => window.msgflow.bottlenecks());
        const at = await page.evaluate((id) => window.msgflow.position(id), JSON.parse(arg));
        await page.mouse.click(at.x, at.y);
        await waitFor(page, () => window.msgflow.bottlenecks().chain.length > 0);
        send(Object.assign(coloured, { chain: (await page.evaluate(() => window.msgflow.bottlenecks())).chain }));
      } else if (cmd === 'marks') {
        // a bottleneck marked in the history: a tick on the slider, and
        // the list's entry shows the range where it began
        const label = JSON.parse(arg);
        await waitFor(page, (l) => Array.from(document.querySelectorAll('#range-marks option'))
                      .some((o) => o.label === l), label);
        const marks = await page.evaluate(() => ({
          ticks: Array.from(document.querySelectorAll('#range-marks option')).map((o) => [+o.value, o.label]),
          jump: Array.from(document.getElementById('range-jump').options).map((o) => o.textContent)
        }));
        await page.selectOption('#range-jump', { index: 1 });
        await waitFor(page, () => document.getElementById('status').textContent === 'history');
        send(Object.assign(marks, await page.evaluate(() => ({
          status: document.getElementById('status').textContent,
          range: document.getElementById('range-text').textContent
        }))));
      } else if (cmd === 'clickedge') {
        const [s, r] = JSON.parse(arg);
        const at = await page.evaluate((id) => window.msgflow.position(id), s + '\u0000' + r);
        await page.mouse.click(at.x, at.y);
        await waitFor(page, () => document.querySelector('#details-body table.kinds'));
        send(await page.evaluate(() => {
          const rows = (sel) => Array.from(document.querySelectorAll(sel)).map((tr) =>
            Array.from(tr.children).map((td) => td.textContent));
          const tables = document.querySelectorAll('#details-body table');
          return {
            title: document.getElementById('details-title').textContent,
            kinds: rows('#details-body table.kinds tbody tr'),
            chart: !document.querySelector('.chart-box').hidden,
            calls: rows('#details-body table.calls tbody tr'),
            pairs: Array.from(tables[tables.length - 1].querySelectorAll('tbody tr')).map((tr) =>
              Array.from(tr.children).map((td) => td.textContent))
          };
        }));
      } else if (cmd === 'range') {
        const [from, to] = JSON.parse(arg);
        await page.evaluate((r) => window.msgflow.showRange(r), { from, to });
        await waitFor(page, () => window.msgflow.state().range !== null);
        send(Object.assign(await snapshot(page, dialogs), await page.evaluate(() => ({
          status: document.getElementById('status').textContent,
          history: !document.getElementById('history-box').hidden
        }))));
      } else if (cmd === 'compare') {
        const [how, ...r] = arg.split(' ');
        const cr = r.length ? JSON.parse(r.join(' ')) : null;
        await page.evaluate(([h, c]) => window.msgflow.compare(h, c && { from: c[0], to: c[1] }), [how, cr]);
        await waitFor(page, () => document.querySelector('#changes tbody tr'));
        send(await page.evaluate(() => ({
          note: document.getElementById('changes-note').textContent,
          changes: Array.from(document.querySelectorAll('#changes tbody tr')).map((tr) =>
            Array.from(tr.children).map((td) => td.textContent))
        })));
      } else if (cmd === 'shot') {
        const file = outDir + '/' + arg + '.png';
        await page.screenshot({ path: file, fullPage: true });
        send({ file });
      } else if (cmd === 'quit') {
        break;
      } else {
        send({ error: 'unknown step ' + cmd });
      }
    } catch (e) {
      send({ error: String(e), pageErrors: errors });
    }
  }
  await browser.close();
})().catch((e) => { send({ error: String(e) }); process.exit(1); });
