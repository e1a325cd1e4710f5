import glob, os, sqlite3, tempfile

db_path = os.path.join(tempfile.mkdtemp(), "scratch.db")
db = sqlite3.connect(db_path)
for m in sorted(glob.glob("migrations/*.sql")):
    sql = open(m).read().replace("SERIAL", "INTEGER").replace("TIMESTAMPTZ", "TEXT")
    try:
        db.executescript(sql)
    except sqlite3.Error as e:
        print(m, "skipped:", e)
for (name,) in db.execute("select name from sqlite_master where type='table'"):
    cols = [r[1] for r in db.execute(f"pragma table_info({name})")]
    print(f"{name}: {', '.join(cols)}")
db.close()
os.remove(db_path)
