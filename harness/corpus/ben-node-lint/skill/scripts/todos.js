const fs = require('fs');
const path = require('path');
const out = [];
function walk(d) {
  for (const e of fs.readdirSync(d, { withFileTypes: true })) {
    if (e.name.startsWith('.') || e.name === 'node_modules') continue;
    const p = path.join(d, e.name);
    if (e.isDirectory()) walk(p);
    else if (/\.(py|js|sql|md|ya?ml)$/.test(e.name)) {
      fs.readFileSync(p, 'utf8').split('\n').forEach((l, i) => {
        if (/\b(TODO|FIXME|XXX)\b/.test(l)) out.push(`- ${p}:${i + 1} ${l.trim()}`);
      });
    }
  }
}
walk('.');
fs.writeFileSync('TODO.md', `# TODO\n\n${out.join('\n')}\n`);
console.log(`${out.length} items`);
