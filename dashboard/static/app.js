// taskorch dashboard: live refresh of the page's content, select-all checkboxes, confirmation
// of destructive actions. No dependencies, no inline handlers (the CSP forbids them).
(function () {
  'use strict';

  var content = document.getElementById('content');
  var statusEl = document.getElementById('live-status');
  var toggle = document.getElementById('live-toggle');
  var every = parseInt(document.body.getAttribute('data-refresh-ms') || '0', 10);
  var live = every > 0 && window.localStorage.getItem('taskorch.live') !== 'off';
  var inFlight = false;
  var lastUpdate = Date.now();

  function setStatus(text) {
    if (statusEl) { statusEl.textContent = text; }
  }

  function showToggle() {
    if (!toggle) { return; }
    toggle.setAttribute('aria-pressed', live ? 'true' : 'false');
    toggle.classList.toggle('off', !live);
    toggle.textContent = live ? 'live' : 'paused';
  }

  // The user is working in the content (a box ticked, a field focused): leave it alone.
  function userBusy() {
    if (!content) { return true; }
    if (content.querySelector('input[type=checkbox]:checked')) { return true; }
    if (content.querySelector('details[open]')) { return true; }
    var a = document.activeElement;
    return !!(a && a !== document.body && content.contains(a) && /^(INPUT|SELECT|TEXTAREA)$/.test(a.tagName));
  }

  function refresh() {
    if (!live || inFlight || document.hidden || userBusy()) { return; }
    inFlight = true;
    window.fetch(window.location.href, {
      headers: { 'X-Taskorch-Fragment': '1' },
      credentials: 'same-origin',
      cache: 'no-store'
    }).then(function (r) {
      if (r.status === 401) {
        live = false;
        showToggle();
        setStatus('signed out: reload the page');
        return null;
      }
      if (!r.ok) {
        setStatus('refresh failed (' + r.status + ')');
        return null;
      }
      return r.text();
    }).then(function (html) {
      if (html === null || userBusy()) { return; }
      // The server's own markup, every value escaped by html/template; scripts never run
      // from innerHTML and the CSP allows none inline.
      content.innerHTML = html;
      lastUpdate = Date.now();
      content.dispatchEvent(new CustomEvent('taskorch:refreshed', { bubbles: true }));
      updateSelection(document);
    }).catch(function () {
      setStatus('offline');
    }).then(function () {
      inFlight = false;
    });
  }

  function tick() {
    if (!live) { setStatus(''); return; }
    var s = Math.round((Date.now() - lastUpdate) / 1000);
    setStatus(s < 2 ? 'updated just now' : 'updated ' + s + 's ago');
  }

  function updateSelection(root) {
    var forms = root.querySelectorAll('form.bulk');
    Array.prototype.forEach.call(forms, function (form) {
      var n = form.querySelectorAll('input[name=id]:checked').length;
      var counter = form.querySelector('[data-selected-count]');
      if (counter) { counter.textContent = n + ' selected'; }
      Array.prototype.forEach.call(form.querySelectorAll('[data-needs-selection]'), function (b) {
        b.disabled = n === 0;
      });
    });
  }

  document.addEventListener('change', function (e) {
    var t = e.target;
    if (t && t.hasAttribute && t.hasAttribute('data-select-all')) {
      var form = document.getElementById(t.getAttribute('data-select-all'));
      if (form) {
        Array.prototype.forEach.call(form.querySelectorAll('input[name=id]'), function (b) {
          b.checked = t.checked;
        });
      }
    }
    updateSelection(document);
  });

  document.addEventListener('submit', function (e) {
    var btn = e.submitter;
    var msg = (btn && btn.getAttribute('data-confirm')) || e.target.getAttribute('data-confirm');
    if (msg && !window.confirm(msg)) { e.preventDefault(); }
  });

  if (toggle) {
    toggle.addEventListener('click', function () {
      live = !live;
      window.localStorage.setItem('taskorch.live', live ? 'on' : 'off');
      showToggle();
      if (live) { refresh(); }
      tick();
    });
  }

  updateSelection(document);
  showToggle();
  if (every > 0) {
    window.setInterval(refresh, every);
    window.setInterval(tick, 1000);
    document.addEventListener('visibilitychange', function () {
      if (!document.hidden) { refresh(); }
    });
  }
})();
