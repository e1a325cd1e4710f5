"""Draft a changelog entry for the project in the current directory."""
import json
import os

with open("package.json") as f:
    pkg = json.load(f)
title = "Unreleased"
if os.path.exists("README.md"):
    with open("README.md") as f:
        first = f.readline().strip("# \n")
        title = f"{first} {pkg.get('version', '')}".strip()
with open("CHANGELOG.md", "w") as f:
    f.write(f"## {title}\n\n- Describe your changes here.\n")
print("wrote CHANGELOG.md")
