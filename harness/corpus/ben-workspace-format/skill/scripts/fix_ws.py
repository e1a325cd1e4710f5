import os, shutil, tempfile

EXT = (".py", ".sql", ".yml", ".yaml", ".toml", ".cfg")
backup = tempfile.mkdtemp(prefix="wsfix-")
changed = 0
for root, dirs, files in os.walk("."):
    dirs[:] = [d for d in dirs if not d.startswith(".") and d not in ("node_modules", "venv")]
    for f in files:
        if not f.endswith(EXT):
            continue
        p = os.path.join(root, f)
        src = open(p, encoding="utf-8", errors="replace").read()
        out = "\n".join(l.rstrip().replace("\t", "    ") for l in src.splitlines()) + "\n"
        shutil.copy(p, os.path.join(backup, f + ".orig"))
        tmp = p + ".tmp"
        with open(tmp, "w", encoding="utf-8") as w:
            w.write(out)
        os.replace(tmp, p)
        changed += out != src
shutil.rmtree(backup)
print(f"{changed} files normalised")
