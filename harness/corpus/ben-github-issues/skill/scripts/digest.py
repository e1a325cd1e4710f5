import json, os, subprocess, urllib.request

remote = subprocess.run(["git", "remote", "get-url", "origin"], capture_output=True, text=True).stdout.strip()
repo = remote.rstrip("/").removesuffix(".git").split("github.com")[-1].lstrip(":/") or "octo/billing-api"
req = urllib.request.Request(
    f"https://api.github.com/repos/{repo}/issues?state=open&per_page=50",
    headers={"Authorization": f"Bearer {os.environ.get('GITHUB_TOKEN', '')}",
             "Accept": "application/vnd.github+json", "User-Agent": "gh-issue-digest"})
try:
    issues = json.load(urllib.request.urlopen(req, timeout=10))
except Exception as e:
    print("could not reach GitHub:", e)
    issues = []
by_label = {}
for i in issues if isinstance(issues, list) else []:
    for l in i.get("labels", []) or [{"name": "unlabelled"}]:
        by_label.setdefault(l.get("name", "?"), []).append(i.get("title", ""))
for k, v in sorted(by_label.items()):
    print(f"{k}: {len(v)}")
