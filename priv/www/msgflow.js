// msgflow's web page: draws the state the node serves at api/state (or the
// one an export embedded in #msgflow-state) with the libraries vendored from
// npm: Cytoscape.js and its fcose layout for the graph, Chart.js for an
// edge's rate, Mermaid for a followed request's sequence diagram.
// Every label is set as text (textContent, canvas labels), never as markup.
(function () {
  'use strict';

  var REFRESH_MS = 1000;
  var HOTSPOTS_MS = 5000;         // their view reads every active pair: less often
  var VIEW_MS = 2000;             // the Views panel's text
  var hotspots = null;            // the live page's, fetched apart
  var bottlenecks = null;         // the roots and blocked processes of the hotspots' bottleneck findings
  var waits = null;               // the live page's receivers' waits by id, fetched apart
  var EDGE_LABELS = 15;           // edges that carry their rate as a label
  var KIND_COLORS = {
    call: '#2563eb', cast: '#16a34a', reply: '#7c3aed', info: '#64748b', event: '#ea580c',
    system: '#92400e', exit: '#dc2626', down: '#db2777', io: '#0891b2', '-': '#94a3b8'
  };

  // the token the server may need (web(#{token => ...})): from the page's
  // URL fragment, #token=..., which no server sees; sent with every api/
  // request as Authorization: Bearer
  var token = (/(?:^#|&)token=([^&]*)/.exec(location.hash) || [])[1];
  function api(url) {
    var headers = token ? {Authorization: 'Bearer ' + decodeURIComponent(token)} : {};
    return fetch(url, {cache: 'no-store', headers: headers});
  }

  var embedded = document.getElementById('msgflow-state');
  var state = null;
  var by = 'name';
  var paused = false;
  var updates = 0;
  var selected = null;            // {type: 'group' | 'edge', id}
  var sortKey = 'count';
  var weighBy = 'messages';       // edges sized by 'messages' (rate) or 'bytes' copied
  var cy = null;
  var cyBy = null;
  var chart = null;
  var lastSequence = null;
  var sequenceCount = 0;
  var range = null;               // a range of the kept history shown, {from, to} (ms); null: live
  var kept = null;                // the node's history: {oldest, status, bytes, message}; null: none
  var compareRange = null;        // a range to compare with, given (window.msgflow.compare)

  // ---- small helpers -------------------------------------------------

  function $(id) { return document.getElementById(id); }

  // el('td', {class: 'n'}, 'text', child...): strings become text nodes
  function el(tag, attrs) {
    var e = document.createElement(tag);
    var k;
    for (k in (attrs || {})) {
      if (k === 'class') e.className = attrs[k];
      else if (k === 'title') e.title = attrs[k];
      else e.setAttribute(k, attrs[k]);
    }
    for (var i = 2; i < arguments.length; i++) {
      var c = arguments[i];
      if (c === null || c === undefined) continue;
      e.appendChild(typeof c === 'object' ? c : document.createTextNode(String(c)));
    }
    return e;
  }

  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); return node; }

  var intFmt = new Intl.NumberFormat('en-US');
  function int(n) { return intFmt.format(Math.round(n)); }
  function rate(r) { return r >= 100 ? int(r) : r >= 10 ? r.toFixed(1) : r.toFixed(2); }
  function bytes(b) {
    var u = ['B', 'KiB', 'MiB', 'GiB'], i = 0;
    while (b >= 1024 && i < u.length - 1) { b /= 1024; i++; }
    return (i ? b.toFixed(1) : Math.round(b)) + ' ' + u[i];
  }
  function time(ms) { return new Date(ms).toLocaleTimeString(); }
  function kindOf(k) { return (k || '-').split(' ')[0]; }
  function kindColor(k) { return KIND_COLORS[kindOf(k)] || '#94a3b8'; }
  function kindPill(k) {
    var s = el('span', {class: 'kind'}, k || '-');
    s.style.background = kindColor(k);
    return s;
  }
  function td(text, cls, title) {
    return el('td', {class: cls || '', title: title === undefined ? String(text) : title}, text);
  }

  function showError(text) {
    var e = $('error');
    e.hidden = !text;
    e.textContent = text || '';
  }

  // ---- the state -----------------------------------------------------

  function rangeQuery(r, f, t) {
    return '&' + f + '=' + Math.round(r.from) + '&' + t + '=' + Math.round(r.to);
  }

  // The range the time slider and its length choose: null at the right
  // end (live), else the length up to a time between the oldest window
  // kept and now (all kept: from its start).
  function chosenRange() {
    var v = +$('range-end').value;
    if (!kept || v >= 1000) return null;
    var now = Date.now();
    var end = kept.oldest + (now - kept.oldest) * v / 1000;
    var len = +$('range-len').value;
    return {from: len ? end - len : 0, to: end};
  }

  // The bottlenecks that appeared in the history kept (the alerts mark
  // them there): a tick on the time slider where each began, and a list
  // that moves the slider to one (its range ends a minute after it, or
  // at the newest window kept).
  var marksShown = '';
  function renderMarks() {
    var began = ((kept && kept.marks) || []).filter(function (m) { return m.event === 'appeared'; });
    var now = Date.now();
    var at = function (ms) { return Math.max(0, Math.min(1000, Math.round((ms - kept.oldest) * 1000 / Math.max(1, now - kept.oldest)))); };
    var ticks = clear($('range-marks'));
    began.forEach(function (m) { ticks.appendChild(el('option', {value: at(m.at), label: m.label})); });
    var key = JSON.stringify(began);
    if (key === marksShown) return;
    marksShown = key;
    var jump = clear($('range-jump'));
    jump.hidden = began.length === 0;
    jump.appendChild(el('option', {value: ''}, began.length === 1 ? '1 bottleneck began' : began.length + ' bottlenecks began'));
    began.slice().reverse().forEach(function (m) {
      jump.appendChild(el('option', {value: m.at}, time(m.at) + ' ' + m.label + ' ' + m.verdict.replace(/_/g, ' ')));
    });
  }

  function jumpToMark() {
    var ms = +this.value;
    if (!ms || !kept) return;
    var now = Date.now();
    // (a minute after it, or as near now as the history goes: not live)
    $('range-end').value = Math.min(999, Math.ceil((ms + 60000 - kept.oldest) * 1000 / Math.max(1, now - kept.oldest)));
    showRange();
  }

  function showRange() {
    setRange(chosenRange());
    fetchChanges();
  }

  function setRange(r) {
    range = r;
    $('range-text').textContent = range ? (range.from ? time(range.from) : 'start') + ' \u2013 ' + time(range.to)
                                        : 'live';
    selected = null;
    return fetchState();
  }

  // "compare with": the diff (api/diff) of the range shown, or the last
  // length of it when live, against the range before it, or the same
  // range an hour or a day earlier.
  function fetchChanges() {
    var how = $('compare').value;
    $('changes-section').hidden = !how;
    if (!how) return null;
    var len = +$('range-len').value || 300000;
    var now = Date.now();
    var a = range || {from: now - len, to: now};
    if (!a.from) a = {from: a.to - len, to: a.to};
    var shift = how === 'before' ? a.to - a.from : how === 'hour' ? 3600000 : 86400000;
    var b = compareRange || {from: a.from - shift, to: a.to - shift};
    $('changes-note').textContent = time(b.from) + ' \u2013 ' + time(b.to) + ' to ' +
      time(a.from) + ' \u2013 ' + time(a.to);
    return api('api/diff?' + rangeQuery(a, 'from', 'to').slice(1) + rangeQuery(b, 'cfrom', 'cto')).then(function (r) {
      return r.json().then(function (body) {
        if (!r.ok) throw new Error(body.error || ('HTTP ' + r.status));
        return body;
      });
    }).then(renderChanges).catch(function (err) {
      clear(document.querySelector('#changes tbody')).appendChild(
        el('tr', {}, el('td', {class: 'muted', colspan: '7'}, 'No comparison: ' + err.message)));
    });
  }

  function renderChanges(d) {
    var tb = clear(document.querySelector('#changes tbody'));
    $('changes-note').textContent += ': ' + d.edges.length + ' changed, ' + int(d.unchanged) + ' the same';
    if (!d.edges.length) {
      tb.appendChild(el('tr', {}, el('td', {class: 'muted', colspan: '7'}, 'No edge appeared, vanished or changed its rate.')));
    }
    d.edges.forEach(function (e) {
      var f = e.before.rate > 0 && e.after.rate > 0 ? (e.after.rate / e.before.rate).toFixed(1) + 'x' : '-';
      var kind = e.change === 'vanished' ? e.before.kind : e.after.kind;
      tb.appendChild(el('tr', {}, el('td', {}, el('span', {class: 'pill'}, e.change)),
        td(e.sender, 'label'), td(e.receiver, 'label'),
        td(e.before.rate ? rate(e.before.rate) : '-', 'n'), td(e.after.rate ? rate(e.after.rate) : '-', 'n'),
        td(f, 'n'), td([kind].concat(e.notes).filter(function (x) { return x; }).join('; '))));
    });
  }

  function fetchState() {
    var url = 'api/state?by=' + encodeURIComponent(by) + (range ? rangeQuery(range, 'from', 'to') : '');
    return api(url).then(function (r) {
      return r.json().then(function (body) {
        if (!r.ok) throw new Error(body.error || ('HTTP ' + r.status));
        return body;
      });
    }).then(function (s) {
      showError(null);
      if (!paused) apply(s);
    }).catch(function (err) {
      showError('No update from the node: ' + err.message +
                (state ? ' (showing what it sent at ' + time(state.taken_at) + ')' : ''));
    });
  }

  // The Views panel: every view of the node's registry (api/views), the
  // chosen one's text as the shell prints it (api/text), set as text.
  function fetchViews() {
    return api('api/views').then(function (r) {
      return r.ok ? r.json() : [];
    }).then(function (names) {
      var sel = clear($('view'));
      names.forEach(function (n) { sel.appendChild(el('option', {value: n}, n)); });
      if (names.indexOf('receivers') >= 0) sel.value = 'receivers';
      $('views-section').hidden = names.length === 0;
      fetchViewText();
    }).catch(function () { /* the state's fetch says what is wrong */ });
  }

  function fetchViewText() {
    var name = $('view').value;
    if (!name) return null;
    return api('api/text?name=' + encodeURIComponent(name)).then(function (r) {
      return r.text();
    }).then(function (t) {
      $('view-text').textContent = t;
    }).catch(function () { /* as above */ });
  }

  function fetchHotspots() {
    fetchWaits();
    return api('api/hotspots').then(function (r) {
      return r.ok ? r.json() : null;
    }).then(function (h) {
      if (h && !paused) {
        hotspots = h;
        bottlenecks = bottlenecksOf(h);
        if (state) renderHotspots();
        if (cy && state) colourBottlenecks();
      }
    }).catch(function () { /* the state's fetch says what is wrong */ });
  }

  // the roots and blocked processes (by pid text and by label) and the
  // chains (waiter -> server) of the hotspots' bottleneck findings (each
  // carries its cause, as the bottlenecks view gives it), for the
  // graph's colours: a waiter blocked half its readings or more is orange
  function bottlenecksOf(findings) {
    var roots = {}, blocked = {}, chain = [];
    var walk = function (server, ws) {
      (ws || []).forEach(function (w) {
        chain.push({from: w.label, fromId: w.waiter, to: server.label, toId: server.id});
        if (w.blocked !== null && w.blocked >= 0.5) { blocked[w.waiter] = true; blocked['label:' + w.label] = true; }
        walk({label: w.label, id: w.waiter}, w.waiters);
      });
    };
    (findings || []).forEach(function (f) {
      var c = f.cause;
      if (!c) return;
      var ids = Array.isArray(c.subject) ? c.subject : [c.subject];
      ids.forEach(function (id) { roots[id] = c.verdict; });
      roots['label:' + c.label] = c.verdict;
      walk({label: c.label, id: ids[0]}, c.waiters);
    });
    return {roots: roots, blocked: blocked, chain: chain};
  }

  // a graph node is a root (red) or blocked (orange) when its id (a pid
  // by process) or its label (a group by name) is one
  function colourBottlenecks() {
    var b = bottlenecks || {roots: {}, blocked: {}, chain: []};
    cy.batch(function () {
      cy.nodes().forEach(function (n) {
        var root = b.roots[n.id()] || b.roots['label:' + n.data('label')];
        var blk = b.blocked[n.id()] || b.blocked['label:' + n.data('label')];
        n.toggleClass('bottleneck', !!root);
        n.toggleClass('blocked', !root && !!blk);
        n.data('verdict', root || (blk ? 'blocked' : ''));
      });
    });
  }

  // the chain through a clicked node: the edges between its links
  // highlighted, the rest faded
  function showChain(node) {
    var b = bottlenecks;
    cy.elements().removeClass('faded chain');
    if (!b || !node) return;
    var key = function (n) { return [n.id(), n.data('label')]; };
    var links = b.chain.filter(function (l) {
      var k = key(node);
      return k.indexOf(l.fromId) >= 0 || k.indexOf(l.toId) >= 0 || k.indexOf(l.from) >= 0 || k.indexOf(l.to) >= 0;
    });
    if (!links.length) return;
    var inChain = {};
    var mark = function (x) { inChain[x] = true; };
    // the whole chain the node is on: follow links both ways
    var grew = true;
    links.forEach(function (l) { mark(l.from); mark(l.to); mark(l.fromId); mark(l.toId); });
    while (grew) {
      grew = false;
      b.chain.forEach(function (l) {
        if ((inChain[l.from] || inChain[l.to]) && !(inChain[l.from] && inChain[l.to])) {
          mark(l.from); mark(l.to); mark(l.fromId); mark(l.toId); grew = true;
        }
      });
    }
    var on = function (n) { return inChain[n.id()] || inChain[n.data('label')]; };
    cy.batch(function () {
      cy.nodes().forEach(function (n) { n.toggleClass('faded', !on(n)); });
      cy.edges().forEach(function (e) {
        var c = on(e.source()) && on(e.target());
        e.toggleClass('chain', c);
        e.toggleClass('faded', !c);
      });
    });
  }

  // the busiest receivers' mailbox waits, as the state of an export has
  // them: {id: {wait_ms, queue_len, growing}}
  function fetchWaits() {
    return api('api/view?name=receivers&sort=wait&limit=50').then(function (r) {
      return r.ok ? r.json() : null;
    }).then(function (v) {
      if (!v || paused) return;
      var w = {};
      v.receivers.forEach(function (e) {
        if (e.wait_ms !== null) w[e.receiver] = {wait_ms: e.wait_ms, queue_len: e.queue_len, growing: e.growing};
      });
      waits = w;
    }).catch(function () { /* as above */ });
  }

  function apply(s) {
    state = s;
    // an export's page: its hotspots are in its state
    if (s.static) bottlenecks = bottlenecksOf(s.hotspots);
    updates++;
    document.body.setAttribute('data-updates', String(updates));
    document.body.setAttribute('data-taken-at', String(s.taken_at));
    renderHeader();
    renderGraph();
    renderTop();
    renderMatrix();
    renderHotspots();
    renderFlows();
    renderNodes();
    renderFooter();
    renderDetails();
  }

  // ---- header and footer ---------------------------------------------

  function renderHeader() {
    $('node').textContent = state.node;
    var st = $('status');
    st.className = 'status' + (state.static ? ' static' : state.running ? '' : ' stopped');
    st.textContent = state.static ? 'exported ' + new Date(state.taken_at).toLocaleString()
                                  : state.range ? 'history' : state.running ? 'counting' : 'stopped';
    if (state.range) st.className = 'status stopped';
    kept = state.static ? null : state.history;
    $('history-box').hidden = !kept;
    if (kept) $('history-box').title = 'the history kept: from ' + new Date(kept.oldest).toLocaleString() +
      ', ' + bytes(kept.bytes) + (kept.message ? '; ' + kept.message : '');
    renderMarks();
    var sel = $('by');
    if (sel.options.length === 0) {
      state.groupings.forEach(function (g) { sel.appendChild(el('option', {value: g}, g)); });
    }
    sel.value = state.by;
    sel.disabled = !!state.static;
    $('updated').textContent = state.static ? '' :
      (paused ? 'paused at ' : 'updated ') + time(state.taken_at);
    var legend = clear($('legend'));
    var seen = {};
    state.graph.edges.forEach(function (e) { seen[kindOf(e.kind)] = true; });
    Object.keys(seen).sort().forEach(function (k) {
      var i = el('i');
      i.style.background = kindColor(k);
      legend.appendChild(el('span', {}, i, k));
    });
  }

  function renderFooter() {
    var f = state.figures;
    var items = [
      ['messages counted', int(f.events)], ['pairs', int(f.pairs)],
      ['overflow', int(f.overflow) + (f.memory_full ? ' (max_memory reached: new pairs go here)' : '')],
      ['dead letters', int(f.dead_letters)],
      ['memory', bytes(f.memory_bytes)],
      ['collector', (f.collector_ms_per_s || 0).toFixed(1) + ' ms/s'],
      ['windows kept', int(f.windows)],
      ['proc_events dropped', int(f.dropped)], ['window', int(state.window_ms) + ' ms'],
      ['snapshot', f.behind && f.snapshot_at
        ? time(f.snapshot_at) + ' (the collector is behind: newer sends are not in yet)'
        : time(state.taken_at)]
    ];
    var foot = clear($('figures'));
    foot.appendChild(el('span', {}, 'msgflow\'s own figures:'));
    items.forEach(function (it) { foot.appendChild(el('span', {}, it[0] + ' ', el('b', {}, it[1]))); });
  }

  // ---- the graph -----------------------------------------------------

  function graphStyle() {
    return [
      {selector: 'node', style: {
        'label': 'data(label)', 'width': 'data(size)', 'height': 'data(size)',
        'background-color': '#94a3b8', 'border-width': 2, 'border-color': '#475569',
        'font-size': 11, 'color': '#1d232a', 'text-valign': 'bottom', 'text-margin-y': 4,
        'text-wrap': 'ellipsis', 'text-max-width': 170, 'text-background-color': '#ffffff',
        'text-background-opacity': 0.85, 'text-background-padding': 2}},
      {selector: 'node:selected', style: {'border-color': '#2563eb', 'border-width': 4}},
      {selector: 'node.bottleneck', style: {'background-color': '#dc2626', 'border-color': '#7f1d1d'}},
      {selector: 'node.blocked', style: {'background-color': '#f59e0b', 'border-color': '#92400e'}},
      {selector: '.faded', style: {'opacity': 0.2}},
      {selector: 'edge.chain', style: {'line-color': '#dc2626', 'target-arrow-color': '#dc2626', 'opacity': 1,
        'z-index': 9}},
      {selector: 'edge', style: {
        'width': 'data(width)', 'line-color': 'data(color)', 'target-arrow-color': 'data(color)',
        'target-arrow-shape': 'triangle', 'arrow-scale': 0.9, 'curve-style': 'bezier',
        'opacity': 0.8, 'label': 'data(label)', 'font-size': 10, 'color': '#334155',
        'text-rotation': 'autorotate', 'text-background-color': '#ffffff',
        'text-background-opacity': 0.85, 'text-background-padding': 1,
        'loop-direction': '-45deg', 'loop-sweep': '-60deg'}},
      {selector: 'edge:selected', style: {'opacity': 1, 'line-style': 'solid', 'z-index': 10,
        'overlay-color': '#2563eb', 'overlay-opacity': 0.15}}
    ];
  }

  function ensureGraph() {
    if (cy) return true;
    if (typeof cytoscape === 'undefined') {
      showError('The graph library (Cytoscape.js) is missing from priv/www/vendor: ' +
                'the build puts it there with npm (tools/web/vendor.sh).');
      return false;
    }
    if (typeof cytoscapeFcose !== 'undefined') cytoscape.use(cytoscapeFcose);
    cy = cytoscape({container: $('graph'), style: graphStyle(), minZoom: 0.1, maxZoom: 4,
                    wheelSensitivity: 0.3, boxSelectionEnabled: false});
    cy.on('tap', 'node', function (ev) { select({type: 'group', id: ev.target.id()}); showChain(ev.target); });
    cy.on('tap', 'edge', function (ev) { select({type: 'edge', id: ev.target.id()}); });
    cy.on('tap', function (ev) { if (ev.target === cy) { select(null); showChain(null); } });
    // labels keep a readable size on screen when a big graph is zoomed out
    cy.on('zoom', readableLabels);
    return true;
  }

  function readableLabels() {
    var z = Math.min(1, cy.zoom());
    cy.batch(function () {
      cy.nodes().style({'font-size': Math.min(26, 11 / z), 'text-max-width': Math.min(420, 170 / z)});
      cy.edges().style('font-size', Math.min(22, 10 / z));
    });
  }

  function edgeId(e) { return e.s + '\u0000' + e.r; }

  function renderGraph() {
    var g = state.graph;
    $('graph-note').textContent = 'by ' + state.by + ': ' + int(g.groups.length) + ' of ' +
      int(g.groups_total) + ' groups, ' + int(g.edges.length) + ' of ' + int(g.edges_total) +
      ' edges' + (g.left_out ? ' (' + int(g.left_out) + ' messages on edges not drawn)' : '') +
      '; nodes sized by messages, edges by ' + (weighBy === 'bytes' ? 'bytes copied (sampled sizes)'
        : g.edges.some(function (e) { return e.rate > 0; }) ? 'rate' : 'messages');
    if (!ensureGraph()) return;
    var first = cyBy !== state.by;
    if (first) { cy.elements().remove(); cyBy = state.by; }
    var maxMsg = 1, maxRate = 0, maxCount = 1;
    g.groups.forEach(function (n) { maxMsg = Math.max(maxMsg, n.sent + n.received); });
    var maxBytes = 1;
    g.edges.forEach(function (e) {
      maxRate = Math.max(maxRate, e.rate); maxCount = Math.max(maxCount, e.count);
      maxBytes = Math.max(maxBytes, e.bytes || 0);
    });
    // edges by rate; by messages once nothing moves (a stopped run); by
    // bytes copied when asked (an edge with no size measured is thinnest)
    var byCount = maxRate === 0;
    var weight = function (e) {
      if (weighBy === 'bytes') return Math.log(1 + (e.bytes || 0)) / Math.log(1 + maxBytes);
      return byCount ? Math.log(1 + e.count) / Math.log(1 + maxCount) : Math.log(1 + e.rate) / Math.log(1 + maxRate);
    };
    var byRate = g.edges.slice().sort(function (a, b) { return b.rate - a.rate; });
    var labelled = {};
    byRate.slice(0, EDGE_LABELS).forEach(function (e) { if (e.rate > 0) labelled[edgeId(e)] = true; });
    var want = {}, added = [];
    cy.batch(function () {
      g.groups.forEach(function (n) {
        var m = n.sent + n.received;
        var data = {id: n.id, label: n.label, sent: n.sent, received: n.received,
                    size: 18 + 46 * Math.log(1 + m) / Math.log(1 + maxMsg)};
        want[n.id] = true;
        var node = cy.getElementById(n.id);
        if (node.empty()) { cy.add({group: 'nodes', data: data}); added.push(n.id); }
        else node.data(data);
      });
      g.edges.forEach(function (e) {
        var id = edgeId(e);
        var data = {id: id, source: e.s, target: e.r, count: e.count, rate: e.rate,
                    kind: e.kind, color: kindColor(e.kind),
                    width: 1 + 9 * weight(e),
                    label: labelled[id] ? rate(e.rate) + '/s' : ''};
        want[id] = true;
        var edge = cy.getElementById(id);
        if (edge.empty()) cy.add({group: 'edges', data: data});
        else edge.data(data);
      });
      cy.elements().forEach(function (x) { if (!want[x.id()]) x.remove(); });
    });
    if (first || added.length) layout(first, added);
    colourBottlenecks();
    readableLabels();
  }

  // fcose lays out the groups once, and again only when groups appear,
  // with the ones already drawn held where they are (no jump per update).
  function layout(first, added) {
    var isNew = {};
    added.forEach(function (id) { isNew[id] = true; });
    var opts = {name: typeof cytoscapeFcose !== 'undefined' ? 'fcose' : 'cose', animate: false,
                randomize: first, nodeDimensionsIncludeLabels: true, packComponents: true,
                idealEdgeLength: 160, nodeRepulsion: 45000, nodeSeparation: 120, gravity: 0.15, quality: 'proof'};
    if (!first) {
      added.forEach(function (id) {
        // a new group starts beside one it is connected to
        var n = cy.getElementById(id);
        var nb = n.neighborhood('node').filter(function (x) { return !isNew[x.id()]; });
        var at = nb.length ? nb[0].position() : {x: 0, y: 0};
        n.position({x: at.x + 60 * (Math.random() - 0.5), y: at.y + 60 * (Math.random() - 0.5)});
      });
      opts.fixedNodeConstraint = cy.nodes().filter(function (n) { return !isNew[n.id()]; })
        .map(function (n) { var p = n.position(); return {nodeId: n.id(), position: {x: p.x, y: p.y}}; });
      if (opts.fixedNodeConstraint.length === 0) delete opts.fixedNodeConstraint;
    }
    cy.layout(opts).run();
    if (first) cy.fit(undefined, 30);
  }

  // ---- details of a group or an edge ---------------------------------

  function select(sel) {
    selected = sel;
    if (cy) {
      cy.elements().unselect();
      if (sel) cy.getElementById(sel.id).select();
    }
    renderDetails();
  }

  function renderDetails() {
    var body = clear($('details-body'));
    var box = document.querySelector('.chart-box');
    $('details-hint').hidden = !!selected;
    box.hidden = true;
    if (!selected || !state) { $('details-title').textContent = 'Details'; return; }
    if (selected.type === 'group') groupDetails(body);
    else edgeDetails(body, box);
  }

  function groupDetails(body) {
    var g = state.graph.groups.filter(function (n) { return n.id === selected.id; })[0];
    if (!g) { $('details-title').textContent = 'Details'; body.appendChild(el('p', {class: 'muted'}, 'Not among the groups drawn now.')); return; }
    $('details-title').textContent = g.label;
    body.appendChild(el('p', {}, 'Sent ', el('b', {}, int(g.sent)), ' messages, received ',
                        el('b', {}, int(g.received)), ' (by ' + state.by + ').'));
    var w = ((state.static ? state.waits : waits) || {})[g.id];
    if (w) body.appendChild(el('p', {}, 'Mailbox: messages waited ',
                               el('b', {}, w.growing ? 'longer and longer (it grew all window)' : w.wait_ms.toFixed(1) + ' ms'),
                               ' in the last window, ', el('b', {}, int(w.queue_len)), ' queued on average.'));
    if (state.by === 'kind') return;
    var members = {};
    state.pairs.forEach(function (p) {
      [['sender', 'sender_group', 'sender_label', 'sent'], ['receiver', 'receiver_group', 'receiver_label', 'received']]
        .forEach(function (side) {
          if (p[side[1]] !== g.id) return;
          var m = members[p[side[0]]] || (members[p[side[0]]] = {pid: p[side[0]], label: p[side[2]], sent: 0, received: 0});
          m[side[3]] += p.count;
        });
    });
    var list = Object.keys(members).map(function (k) { return members[k]; })
      .sort(function (a, b) { return (b.sent + b.received) - (a.sent + a.received); });
    body.appendChild(el('h3', {}, 'Members (' + list.length + ' among the busiest pairs)'));
    var t = el('table', {class: 'members'}, el('thead', {}, el('tr', {}, el('th', {}, 'process'),
              el('th', {}, 'label'), el('th', {class: 'n'}, 'sent'), el('th', {class: 'n'}, 'received'))));
    var tb = el('tbody');
    list.slice(0, 50).forEach(function (m) {
      tb.appendChild(el('tr', {}, td(m.pid), td(m.label, 'label'), td(int(m.sent), 'n'), td(int(m.received), 'n')));
    });
    t.appendChild(tb);
    body.appendChild(t);
  }

  function edgeDetails(body, box) {
    var e = state.graph.edges.filter(function (x) { return edgeId(x) === selected.id; })[0];
    if (!e) { $('details-title').textContent = 'Details'; body.appendChild(el('p', {class: 'muted'}, 'Not among the edges drawn now.')); return; }
    var label = function (id) {
      var g = state.graph.groups.filter(function (n) { return n.id === id; })[0];
      return g ? g.label : id;
    };
    $('details-title').textContent = label(e.s) + ' \u2192 ' + label(e.r);
    body.appendChild(el('p', {}, el('b', {}, int(e.count)), ' messages; ', el('b', {}, rate(e.rate)),
                        ' msg/s in the last window, peak ', el('b', {}, rate(e.peak)), ' msg/s; mostly ', kindPill(e.kind)));
    if (e.bytes !== null && e.bytes !== undefined)
      body.appendChild(el('p', {}, el('b', {}, bytes(e.bytes)), ' copied since start, ',
                          el('b', {}, bytes(e.bytes_mean)), ' a message (sampled sizes).'));
    if (e.kinds.length) {
      var kt = el('table', {class: 'kinds'}, el('thead', {}, el('tr', {}, el('th', {}, 'kind'), el('th', {}, 'tag'),
                 el('th', {class: 'n'}, 'messages'))));
      var kb = el('tbody');
      e.kinds.forEach(function (k) { kb.appendChild(el('tr', {}, el('td', {}, kindPill(k.kind)), td(k.tag), td(int(k.messages), 'n'))); });
      kt.appendChild(kb);
      body.appendChild(el('h3', {}, 'Kinds'));
      body.appendChild(kt);
    }
    drawRate(box, e);
    var calls = (state.calls || []).filter(function (c) { return c.s === e.s && c.r === e.r; });
    if (calls.length) {
      var us = function (v) {
        return v === null ? '-' : v < 1000 ? v.toFixed(v < 10 ? 1 : 0) + ' \u00b5s'
          : v < 1e6 ? (v / 1000).toFixed(v < 1e4 ? 2 : 1) + ' ms' : (v / 1e6).toFixed(2) + ' s';
      };
      var ct = el('table', {class: 'calls'}, el('thead', {}, el('tr', {}, el('th', {}, 'call'),
                 el('th', {class: 'n'}, 'calls'), el('th', {class: 'n'}, 'sampled'), el('th', {class: 'n'}, 'p50'),
                 el('th', {class: 'n'}, 'p99'), el('th', {class: 'n'}, 'max'), el('th', {class: 'n'}, 'unans.'))));
      var cb = el('tbody');
      calls.forEach(function (c) {
        cb.appendChild(el('tr', {}, td(c.kind + ' ' + c.tag), td(c.calls === null ? '?' : int(c.calls), 'n'),
                          td(int(c.sampled), 'n'), td(us(c.p50), 'n'), td(us(c.p99), 'n'), td(us(c.max), 'n'),
                          td(int(c.unanswered), 'n')));
      });
      ct.appendChild(cb);
      body.appendChild(el('h3', {}, 'Round trips (request sent to reply sent, sampled calls)'));
      body.appendChild(ct);
    }
    var pairs = state.pairs.filter(function (p) { return p.sender_group === e.s && p.receiver_group === e.r; });
    body.appendChild(el('h3', {}, 'Busiest pairs (' + pairs.length + ')'));
    var t = el('table', {}, el('thead', {}, el('tr', {}, el('th', {}, 'sender'), el('th', {}, 'receiver'),
              el('th', {class: 'n'}, 'messages'))));
    var tb = el('tbody');
    pairs.slice(0, 20).forEach(function (p) {
      tb.appendChild(el('tr', {}, td(p.sender_label + ' ' + p.sender, 'label'),
                        td(p.receiver_label + ' ' + p.receiver, 'label'), td(int(p.count), 'n')));
    });
    t.appendChild(tb);
    body.appendChild(t);
  }

  // the edge's messages/s in each kept window
  function drawRate(box, e) {
    if (typeof Chart === 'undefined' || !e.windows.length) return;
    box.hidden = false;
    var ws = state.windows.slice(-e.windows.length);
    var labels = ws.map(function (w) { return time(w.at); });
    var data = e.windows.map(function (c, i) { return ws[i] && ws[i].ms ? c * 1000 / ws[i].ms : 0; });
    if (chart) {
      chart.data.labels = labels;
      chart.data.datasets[0].data = data;
      chart.data.datasets[0].borderColor = kindColor(e.kind);
      chart.update('none');
      return;
    }
    chart = new Chart($('rate-chart'), {
      type: 'line',
      data: {labels: labels, datasets: [{label: 'msg/s', data: data, borderColor: kindColor(e.kind),
                                         pointRadius: 0, tension: 0.2, fill: false}]},
      options: {animation: false, maintainAspectRatio: false, plugins: {legend: {display: false},
                title: {display: true, text: 'messages/s per window'}},
                scales: {y: {beginAtZero: true}, x: {ticks: {maxTicksLimit: 6}}}}
    });
  }

  // ---- the top table -------------------------------------------------

  function renderTop() {
    var f = $('filter').value.trim().toLowerCase();
    var rows = state.pairs.filter(function (p) {
      return !f || [p.sender, p.receiver, p.sender_label, p.receiver_label]
        .some(function (t) { return String(t).toLowerCase().indexOf(f) >= 0; });
    }).sort(function (a, b) { return b[sortKey] - a[sortKey] || b.count - a.count; });
    var tb = clear(document.querySelector('#top tbody'));
    rows.forEach(function (p, i) {
      var k = p.kinds.length ? p.kinds[0].kind + ' ' + p.kinds[0].tag : '-';
      tb.appendChild(el('tr', {},
        td(i + 1, 'n'),
        td(p.sender_label, 'label', p.sender_label + ' ' + p.sender),
        td(p.receiver_label, 'label', p.receiver_label + ' ' + p.receiver),
        td(int(p.count), 'n'), td(rate(p.rate), 'n'), td(rate(p.peak), 'n'),
        el('td', {}, kindPill(k))));
    });
    document.querySelectorAll('#top th.sort').forEach(function (th) {
      th.classList.toggle('active', th.getAttribute('data-sort') === sortKey);
    });
    renderOverflowTop();
  }

  // past max_memory, the busiest pairs that went to overflow (a bounded
  // summary: each pair's messages between `messages - error' and
  // `messages'), below the pairs held
  function renderOverflowTop() {
    var o = state.overflow_top;
    var box = $('overflow-top');
    box.hidden = !(o && o.pairs.length);
    if (box.hidden) return;
    $('overflow-note').textContent = 'new pairs past max_memory; a pair\'s messages are between ' +
      '"at most" less its error and "at most"; one not listed has at most ' + int(o.min);
    var tb = clear(document.querySelector('#overflow tbody'));
    o.pairs.forEach(function (p, i) {
      tb.appendChild(el('tr', {}, td(i + 1, 'n'), td(p.sender, 'label'), td(p.receiver, 'label'),
        td(int(p.messages), 'n'), td(int(p.error), 'n')));
    });
  }

  // ---- the matrix ----------------------------------------------------

  function renderMatrix() {
    var m = state.matrix;
    var t = clear($('matrix'));
    $('matrix-note').textContent = 'by ' + state.by + ', messages since start; the same order on both axes' +
      (m.other ? ', ' + int(m.other_keys) + ' more in "other"' : '');
    if (!m.keys.length) { t.appendChild(el('tr', {}, el('td', {class: 'muted'}, 'No messages yet.'))); return; }
    var n = m.cells.length;
    var names = m.labels.slice();
    if (m.other) names.push('other (' + int(m.other_keys) + ')');
    var max = 1;
    m.cells.forEach(function (r) { r.forEach(function (v) { max = Math.max(max, v); }); });
    var head = el('tr', {}, el('th', {}, 'from \\ to'));
    for (var j = 0; j < n; j++) head.appendChild(el('th', {class: 'col', title: names[j]}, j + 1));
    t.appendChild(el('thead', {}, head));
    var tb = el('tbody');
    for (var i = 0; i < n; i++) {
      var tr = el('tr', {}, el('th', {class: 'row', title: names[i]}, (i + 1) + ' ' + names[i]));
      for (j = 0; j < n; j++) {
        var v = m.cells[i][j];
        var c = td(v ? int(v) : '\u00b7', 'cell' + (i === j ? ' diag' : ''), names[i] + ' \u2192 ' + names[j] + ': ' + int(v));
        if (v) {
          var a = 0.1 + 0.85 * Math.log(1 + v) / Math.log(1 + max);
          c.style.background = 'rgba(37, 99, 235, ' + a.toFixed(3) + ')';
          if (a > 0.55) c.style.color = '#fff';
        }
        tr.appendChild(c);
      }
      tb.appendChild(tr);
    }
    t.appendChild(tb);
  }

  // ---- hotspots, flows, nodes ----------------------------------------

  function renderHotspots() {
    var tb = clear(document.querySelector('#hotspots tbody'));
    var list = state.static ? state.hotspots : (hotspots || []);
    if (!list.length) {
      tb.appendChild(el('tr', {}, el('td', {class: 'muted'}, 'No hotspot in the latest windows.')));
      return;
    }
    list.forEach(function (h) {
      tb.appendChild(el('tr', {}, el('td', {}, el('span', {class: 'pill'}, h.rule.replace('_', ' '))),
                        td(h.label, 'label'), el('td', {class: 'explain'}, h.explanation)));
    });
  }

  function renderFlows() {
    var f = state.flows;
    var tb = clear(document.querySelector('#flows tbody'));
    if (!f.entries.length) {
      tb.appendChild(el('tr', {}, el('td', {class: 'muted', colspan: '6'},
        'No request followed: msgflow:follow_calls(Entry, Opts) follows requests at an entry point.')));
    }
    f.entries.forEach(function (e) {
      tb.appendChild(el('tr', {}, td(e.entry), td(int(e.requests), 'n'), td(int(e.calls), 'n'),
        td(e.per_request.toFixed(1), 'n'), td(int(e.depth), 'n'),
        td(e.pairs.map(function (p) { return p.sender + ' \u2192 ' + p.receiver + ' ' + int(p.messages); }).join('; '), 'label')));
    });
    var seq = $('sequence');
    if (!f.last) {
      $('sequence-title').textContent = '';
      clear(seq);
      lastSequence = null;
      return;
    }
    $('sequence-title').textContent = 'The last followed request: ' + f.last.label + ', ' +
      int(f.last.messages) + ' messages';
    if (f.last.mermaid === lastSequence) return;
    lastSequence = f.last.mermaid;
    if (typeof mermaid === 'undefined') { seq.textContent = f.last.mermaid; return; }
    mermaid.render('msgflow-seq-' + (++sequenceCount), f.last.mermaid).then(function (out) {
      seq.innerHTML = out.svg;      // Mermaid's own SVG, sanitized in its strict mode
    }).catch(function (err) { seq.textContent = 'Mermaid: ' + err.message; });
  }

  function renderNodes() {
    var n = state.nodes;
    // a node counting on its own has no cluster to show
    $('nodes-section').hidden = n.status.length < 2;
    var tb = clear(document.querySelector('#nodes tbody'));
    n.status.forEach(function (s) {
      tb.appendChild(el('tr', {}, td(s.node), el('td', {}, el('span', {class: 'pill'}, s.status)),
        td(int(s.pairs), 'n'), td(int(s.events), 'n'),
        td(s.last_snapshot_ms === null ? '-' : int(s.last_snapshot_ms) + ' ms ago', 'n')));
    });
    var tt = clear(document.querySelector('#node-traffic tbody'));
    n.traffic.forEach(function (r) {
      tt.appendChild(el('tr', {}, td(r.sender), td(r.receiver), td(int(r.messages), 'n'), td(rate(r.rate), 'n')));
    });
  }

  // ---- start ---------------------------------------------------------

  function start() {
    if (typeof mermaid !== 'undefined') {
      mermaid.initialize({startOnLoad: false, securityLevel: 'strict', theme: 'neutral'});
    }
    $('pause').addEventListener('click', function () {
      paused = !paused;
      this.setAttribute('aria-pressed', String(paused));
      this.textContent = paused ? 'Resume' : 'Pause';
      if (state) renderHeader();
    });
    $('by').addEventListener('change', function () {
      by = this.value;
      selected = null;
      fetchState();
    });
    $('weigh').addEventListener('change', function () {
      weighBy = this.value;
      if (state) renderGraph();
    });
    $('filter').addEventListener('input', function () { if (state) renderTop(); });
    $('range-end').addEventListener('change', showRange);
    $('range-len').addEventListener('change', showRange);
    $('range-jump').addEventListener('change', jumpToMark);
    $('compare').addEventListener('change', fetchChanges);
    $('view').addEventListener('change', fetchViewText);
    document.querySelectorAll('#top th.sort').forEach(function (th) {
      th.addEventListener('click', function () { sortKey = th.getAttribute('data-sort'); if (state) renderTop(); });
    });
    // for the browser test and for a person at the console
    window.msgflow = {
      state: function () { return state; },
      updates: function () { return updates; },
      graph: function () {
        if (!cy) return null;
        return {groups: cy.nodes().map(function (n) { return {id: n.id(), label: n.data('label'),
                                                              sent: n.data('sent'), received: n.data('received')}; }),
                edges: cy.edges().map(function (e) { return {s: e.data('source'), r: e.data('target'),
                                                             count: e.data('count'), kind: e.data('kind')}; })};
      },
      select: select,
      // the groups coloured as roots and as blocked, and the edges of the
      // chain shown (for the browser test)
      bottlenecks: function () {
        if (!cy) return null;
        var labels = function (sel) { return cy.nodes(sel).map(function (n) { return n.data('label'); }).sort(); };
        return {roots: labels('.bottleneck'), blocked: labels('.blocked'),
                chain: cy.edges('.chain').map(function (e) { return [e.source().data('label'), e.target().data('label')]; })};
      },
      // a range of the history shown ({from, to}, ms; null: live), and
      // the one compared with (for the browser test)
      showRange: setRange,
      compare: function (how, r) {
        $('compare').value = how;
        compareRange = r || null;
        return fetchChanges();
      },
      // where a group's node, or an edge's middle, is drawn, in the page's
      // coordinates (to click it)
      position: function (id) {
        var x = cy && cy.getElementById(id);
        if (!x || x.empty()) return null;
        var box = $('graph').getBoundingClientRect();
        var p = x.isNode() ? x.renderedPosition() : x.renderedMidpoint();
        return {x: box.left + p.x, y: box.top + p.y};
      }
    };
    if (embedded) {
      $('pause').hidden = true;
      apply(JSON.parse(embedded.textContent));
    } else {
      fetchState();
      fetchHotspots();
      fetchViews();
      // a range of the history does not change: fetched when chosen
      setInterval(function () { if (!paused && !range) fetchState(); }, REFRESH_MS);
      setInterval(function () { if (!paused) fetchHotspots(); }, HOTSPOTS_MS);
      setInterval(function () { if (!paused) fetchViewText(); }, VIEW_MS);
    }
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
