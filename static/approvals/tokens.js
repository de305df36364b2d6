// The API tokens page: the Copy button puts the new token, shown only this once, on the clipboard.
const button = document.getElementById("copy-token");
const secret = document.getElementById("new-token-secret");
const status = document.getElementById("copy-token-status");

function selectSecret() {
  const range = document.createRange();
  range.selectNodeContents(secret);
  const selection = window.getSelection();
  selection.removeAllRanges();
  selection.addRange(range);
}

if (button && secret) {
  button.addEventListener("click", async () => {
    try {
      // navigator.clipboard exists only in a secure context (https, or the loopback address).
      await navigator.clipboard.writeText(secret.textContent);
      status.textContent = "Copied to the clipboard.";
      button.dataset.copied = "true";
    } catch (error) {
      selectSecret();
      status.textContent = "The browser did not let the page copy; the token is selected: press Ctrl+C (⌘C).";
    }
  });
}
