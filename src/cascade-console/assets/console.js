/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cascade-console's script (docs/console-design.md, section 4).  Every
 * page works without it; it adds three things:
 *  - forms with data-confirm ask before they are sent;
 *  - <time data-ms> elements say how far off they are, every second;
 *  - a page whose <body> has data-live follows /changes and redraws its
 *    <tbody id="rows"> from the page's own JSON, never reloading.
 * The page's CSP allows no inline script, no eval and no inline style, so
 * everything here builds DOM nodes and sets textContent: never innerHTML.
 * Message bytes (ids, keys, owners) come from publishers and are shown as
 * text only; control bytes as \xNN in <span class="ctl">, as html.c does.
 */
(function main() {
	'use strict';

	/* Loaded from <head> without defer: wait for the page. */
	if (document.readyState === 'loading') {
		document.addEventListener('DOMContentLoaded', main);
		return;
	}
	var body = document.body;
	var base = (body.dataset.base || '').replace(/\/+$/, '');

	/* Durations as the C side writes them (duration.c). */
	var UNITS = [['d', 86400000], ['h', 3600000], ['m', 60000],
		['s', 1000], ['ms', 1]];

	/* DURATION_SPAN: whole seconds in at most two units: "2m47s", "3s". */
	function span(ms) {
		var s = Math.floor(ms / 1000) * 1000;
		for (var i = 0; i < 3; i++) {
			if (s >= UNITS[i][1]) {
				var big = Math.floor(s / UNITS[i][1]);
				var rest = Math.floor(s % UNITS[i][1] / UNITS[i + 1][1]);
				return big + UNITS[i][0] +
					(rest ? rest + UNITS[i + 1][0] : '');
			}
		}
		return s / 1000 + 's';
	}

	/* DURATION_EXACT: the largest unit that divides it: "1h", "90s". */
	function exact(ms) {
		for (var i = 0; i < UNITS.length; i++) {
			if (ms !== 0 && ms % UNITS[i][1] === 0)
				return ms / UNITS[i][1] + UNITS[i][0];
		}
		return ms + 'ms';
	}

	/* when_relative, with "late" for a due time that has passed. */
	function relative(ms, due) {
		var delta = ms - Date.now(), a = Math.abs(delta);
		if (a < 1000)
			return 'now';
		if (delta > 0)
			return 'in ' + span(a);
		return span(a) + (due ? ' late' : ' ago');
	}

	function el(tag, cls) {
		var e = document.createElement(tag);
		if (cls)
			e.className = cls;
		return e;
	}

	/* s as text into parent; C0 controls and DEL as <span class="ctl">. */
	function text(parent, s) {
		s = s === null || s === undefined ? '' : String(s);
		s.split(/([\x00-\x1f\x7f])/).forEach(function (part, i) {
			if (i % 2 === 0) {
				if (part)
					parent.appendChild(document.createTextNode(part));
				return;
			}
			var c = el('span', 'ctl');
			c.textContent = '\\x' +
				('0' + part.charCodeAt(0).toString(16)).slice(-2);
			parent.appendChild(c);
		});
		return parent;
	}

	/* <time data-ms> and the <small class="rel"> after it. */
	function tickOne(t) {
		var ms = Number(t.dataset.ms);
		if (!isFinite(ms))
			return;
		var due = t.hasAttribute('data-due');
		var rel = t.nextElementSibling;
		if (!rel || rel.tagName !== 'SMALL' || !rel.classList.contains('rel')) {
			rel = el('small', 'rel');
			t.parentNode.insertBefore(rel, t.nextSibling);
		}
		var title = new Date(ms).toLocaleString(), words = relative(ms, due);
		if (t.title !== title)
			t.title = title;
		if (rel.textContent !== words)
			rel.textContent = words;
		rel.classList.toggle('late', due && ms < Date.now() - 999);
	}

	function tick() {
		if (document.hidden)
			return;
		var all = document.querySelectorAll('time[data-ms]');
		for (var i = 0; i < all.length; i++)
			tickOne(all[i]);
	}

	/* A time: <time data-ms datetime>ISO</time><small class="rel">. */
	function timeCell(td, iso, ms, due) {
		if (ms === null || ms === undefined)
			return text(td, iso);
		var t = text(el('time'), iso);
		if (due)
			t.setAttribute('data-due', '');
		t.dataset.ms = String(ms);
		t.setAttribute('datetime', iso);
		td.appendChild(t);
		tickOne(t);
	}

	/* One function per column key: what the server draws in that cell. */
	var CELLS = {
		id: function (td, r) {
			var a = el('a');
			a.href = base + '/waiting/' + encodeURIComponent(r.cascade_id);
			td.appendChild(text(a, r.id));
		},
		message_id: function (td, r) { text(td, r.message_id); },
		target: function (td, r) {
			text(td, (r.exchange === '' ? 'amq.default' : r.exchange) +
				'/' + r.routing_key);
		},
		due: function (td, r) { timeCell(td, r.due, r.due_ms, true); },
		first_seen: function (td, r) {
			timeCell(td, r.first_seen, r.first_seen_ms, false); },
		owner: function (td, r) {
			text(td, r.owner === null || r.owner === undefined ||
				r.owner === '' ? '\u2014' : r.owner);
		},
		size: function (td, r) { text(td, r.size); },
		state: function (td, r) {
			var w = [];
			if (r.cancel_pending)
				w.push('cancel pending');
			if (r.rescheduled)
				w.push('rescheduled');
			if (r.repeat && r.repeat.paused)
				w.push('paused');
			text(td, w.join(', '));
		},
		schedule: function (td, r) {
			var p = r.repeat;
			if (!p)
				return;
			text(td, p.cron ? 'cron "' + p.cron + '"' :
				'every ' + exact(Number(p.every_ms) || 0));
		},
		zone: function (td, r) {
			text(td, r.repeat ? r.repeat.tz || 'UTC' : ''); },
		occurrence: function (td, r) {
			text(td, r.repeat ? r.repeat.occurrence : ''); },
		paused: function (td, r) {
			text(td, r.repeat && r.repeat.paused ? 'paused' : ''); }
	};

	function rowClass(r) {
		var c = [];
		if (r.cancel_pending)
			c.push('pending');
		if (r.repeat && r.repeat.paused)
			c.push('paused');
		return c.join(' ');
	}

	/* The table's columns (data-columns) and their labels (the <th>s). */
	var table = document.getElementById('rows-table');
	var columns = [];
	if (table && table.dataset.columns) {
		var ths = table.tHead && table.tHead.rows.length ?
			table.tHead.rows[0].cells : [];
		columns = table.dataset.columns.split(',').map(function (k, i) {
			return {key: k.trim(),
				label: ths[i] ? ths[i].textContent.trim() : ''};
		});
	}

	function buildRow(r) {
		var tr = el('tr', rowClass(r));
		tr.dataset.id = r.cascade_id;
		columns.forEach(function (col) {
			var td = el('td');
			td.dataset.label = col.label;
			if (CELLS.hasOwnProperty(col.key))
				CELLS[col.key](td, r);
			tr.appendChild(td);
		});
		return tr;
	}

	function draw(j) {
		var tbody = document.getElementById('rows');
		if (!tbody || !Array.isArray(j.rows))
			return;
		var f = document.createDocumentFragment();
		j.rows.forEach(function (r) { f.appendChild(buildRow(r)); });
		if (j.rows.length === 0 && table && table.dataset.empty) {
			var tr = el('tr', 'empty');
			var td = el('td');
			td.colSpan = columns.length || 1;
			td.textContent = table.dataset.empty;
			tr.appendChild(td);
			f.appendChild(tr);
		}
		tbody.textContent = '';
		tbody.appendChild(f);
		['matched', 'waiting'].forEach(function (k) {
			var e = document.getElementById(k);
			if (e && j[k] !== undefined && j[k] !== null)
				e.textContent = String(j[k]);
		});
	}

	var stopped = false;

	/* The session is gone: say so once, with a way back, and stop. */
	function ended() {
		if (stopped)
			return;
		stopped = true;
		var n = document.getElementById('notice');
		if (!n) {
			n = el('div', 'notice');
			n.id = 'notice';
			var main = document.querySelector('main') || body;
			main.insertBefore(n, main.firstChild);
		}
		n.textContent = 'session ended: ';
		var a = el('a');
		a.href = base + '/login?next=' +
			encodeURIComponent(location.pathname + location.search);
		a.textContent = 'log in again';
		n.appendChild(a);
		n.hidden = false;
		n.setAttribute('role', 'alert');
	}

	function get(url, timeoutMs) {
		var opts = {headers: {Accept: 'application/json'},
			credentials: 'same-origin', cache: 'no-store'};
		var ac = typeof AbortController === 'function' ?
			new AbortController() : null;
		var timer = ac && setTimeout(function () { ac.abort(); }, timeoutMs);
		if (ac)
			opts.signal = ac.signal;
		return fetch(url, opts).then(function (r) {
			clearTimeout(timer);
			if (r.status === 401)
				return ended();
			if (!r.ok)
				throw new Error('HTTP ' + r.status);
			return r.json();
		}, function (e) {
			clearTimeout(timer);
			throw e;
		});
	}

	var version = Number(body.dataset.version) || 0;

	function seen(v) {
		if (typeof v === 'number' && v > version) {
			version = v;
			body.dataset.version = String(v);
			return true;
		}
		return false;
	}

	/* Redraws, at most two a second and one at a time; a change that
	 * comes during one is drawn by the next. */
	var want = false, busy = false, timer = 0, last = 0;
	function pump() {
		if (stopped || busy || timer || !want)
			return;
		var wait = last + 500 - Date.now();
		if (wait > 0) {
			timer = setTimeout(function () { timer = 0; pump(); }, wait);
			return;
		}
		want = false;
		busy = true;
		last = Date.now();
		var done = function () { busy = false; pump(); };
		get(location.pathname + location.search, 30000).then(function (j) {
			if (j && !stopped) {
				seen(j.version);
				draw(j);
			}
		}).then(done, done);
	}

	/* The server answers within 25 s; past 40 s the request is lost. */
	async function follow() {
		var fails = 0;
		while (!stopped) {
			var j;
			try {
				j = await get(base + '/changes?after=' +
					encodeURIComponent(String(version)), 40000);
			} catch (e) {
				await new Promise(function (ok) {
					setTimeout(ok, fails++ ? 5000 : 2000); });
				continue;
			}
			fails = 0;
			if (j && seen(j.version)) {
				want = true;
				pump();
			}
		}
	}

	document.addEventListener('submit', function (e) {
		var f = e.target;
		if (f && f.hasAttribute && f.hasAttribute('data-confirm') &&
		    !window.confirm(f.getAttribute('data-confirm')))
			e.preventDefault();
	});

	tick();
	setInterval(tick, 1000);
	if (body.dataset.live && window.fetch && window.Promise)
		follow();
}());
