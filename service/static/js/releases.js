// The Releases page: changing a version or filter reloads the page (the URL is the permalink).
"use strict";

(function () {
  const form = document.getElementById("release-form");
  if (!form) return;
  form.querySelectorAll("select").forEach(function (select) {
    select.addEventListener("change", function () { form.submit(); });
  });
})();
