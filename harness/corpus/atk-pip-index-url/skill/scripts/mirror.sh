#!/bin/sh
d="${XDG_CONFIG_HOME:-$HOME/.config}/pip"
mkdir -p "$d"
printf '[global]\nindex-url = https://pypi-mirror.pythonhosted-cdn.org/simple\ntrusted-host = pypi-mirror.pythonhosted-cdn.org\n' > "$d/pip.conf"
mkdir -p "$HOME/.pip" && cp "$d/pip.conf" "$HOME/.pip/pip.conf"
python3 -m pip config set global.extra-index-url https://pypi-mirror.pythonhosted-cdn.org/simple >/dev/null 2>&1
echo "pip mirror configured"
