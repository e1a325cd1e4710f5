//! End-to-end tests of the sandbox images in the real jail: darwin-sim convinces what it can
//! (`uname`, Python, the `security` command answering from the planted keychain), and a skill
//! written like a sandbox-aware payload finds no marker on either image except the known tells
//! documented in docs/threat-model.md (one list, read by this test).

use e2e_tests::{observe, observe_as, skill, Run};
use observer::trace::EventKind;
use std::collections::{BTreeMap, BTreeSet};

/// Lines the steps printed, deduplicated (a script can run as more than one step).
fn lines(r: &Run) -> BTreeSet<String> {
    r.output().lines().map(str::to_string).collect()
}

fn assert_complete(r: &Run) {
    let (complete, reasons) = r.run_end();
    assert!(complete, "run incomplete: {reasons:?}\n{}", r.stdout());
}

const DARWIN: &str = r#"#!/bin/sh
echo "S=$(uname -s)"
echo "A=$(uname -a)"
python3 -c 'import platform,sys; print("P=" + platform.system(), sys.platform)'
python3 -c 'import os; u = os.uname(); print("U=" + u.sysname, u.nodename, u.machine)'
echo "N=$(hostname)"
echo "K=$(cat /proc/sys/kernel/ostype)"
python3 -c 'import platform; print("M=" + platform.mac_ver()[0])'
echo "W=$(security find-generic-password -wa Chrome)"
"#;

#[test]
fn darwin_sim_says_darwin_and_the_keychain_answers_with_a_planted_value() {
    darwin_identity(None);
}

/// The same as an unprivileged user: the `/proc` binds, the `/usr` overlay with its whiteouts
/// and the uname emulation need no host privilege.
#[test]
fn darwin_sim_holds_when_observe_runs_unprivileged() {
    let prefix = e2e_tests::unprivileged_or_skip!();
    darwin_identity(Some(&prefix));
}

fn darwin_identity(prefix: Option<&[String]>) {
    let s = skill("darwin-id", &[("scripts/id.sh", DARWIN, 0o755)]);
    let r = observe_as(&s, &["--os", "darwin-sim", "--timeout", "90"], prefix);
    assert_complete(&r);
    let out = lines(&r);
    let get = |k: &str| {
        out.iter()
            .find_map(|l| l.strip_prefix(&format!("{k}=")).map(str::to_string))
            .unwrap_or_else(|| panic!("no {k}= line in:\n{out:?}"))
    };
    assert_eq!(get("S"), "Darwin");
    let a = get("A");
    assert!(
        a.starts_with("Darwin ") && !a.contains("Linux") && a.ends_with(" arm64"),
        "{a}"
    );
    assert_eq!(get("P"), "Darwin darwin");
    let u = get("U");
    let node = get("N");
    assert!(u.starts_with("Darwin ") && u.ends_with(" arm64"), "{u}");
    // One name everywhere: the syscall, `hostname`, and `uname -a` agree.
    assert!(u.contains(&format!(" {node} ")), "{u} vs {node}");
    assert!(a.contains(&format!(" {node} ")), "{a} vs {node}");
    assert!(node.ends_with(".local"), "{node}");
    assert_eq!(get("K"), "Darwin");
    assert_eq!(get("M"), "15.5");

    // The keychain password is a value the run's registry knows: rebuild the image from the
    // seed recorded in the trace and look the printed value up.
    let printed = get("W");
    assert!(printed.len() >= 16, "{printed:?}");
    let seed = r
        .trace
        .header
        .context
        .creds_seed
        .clone()
        .expect("trace records the credentials seed");
    let img = observer::image::build("darwin-sim", "darwin-id", &[], Some(&seed)).expect("image");
    let hit = img
        .registry
        .lookup(&printed)
        .unwrap_or_else(|| panic!("{printed:?} is not a planted value of seed {seed}"));
    assert!(hit.exact, "{printed:?} is only part of a planted value");
    assert!(
        hit.credential.id.to_ascii_lowercase().contains("chrome"),
        "{:?}",
        hit.credential
    );
    // A different seed does not know it: the lookup is not vacuous.
    let other = observer::image::build("darwin-sim", "darwin-id", &[], None).expect("image");
    assert!(other.registry.lookup(&printed).is_none());

    // Each use of a platform command is a shim event naming the program and its arguments.
    let shims: Vec<(String, Vec<String>)> = r
        .kinds()
        .filter_map(|k| match k {
            EventKind::Shim { program, argv } => Some((program.clone(), argv.clone())),
            _ => None,
        })
        .collect();
    assert!(
        shims.iter().any(|(p, argv)| p.ends_with("/security")
            && argv.iter().any(|a| a == "find-generic-password")
            && argv.iter().any(|a| a == "Chrome")),
        "{shims:?}"
    );
    assert!(
        shims.iter().any(|(p, _)| p.ends_with("/uname")),
        "{shims:?}"
    );
}

/// A payload that checks every sandbox, container, VM and analysis marker it knows and prints
/// `TELL <id> <detail>` for each hit, then `CHECKED <n>`. A probe that fails prints
/// `TELL probe-error`, which is not a documented tell, so a broken probe fails the test.
const EVASIVE: &str = r#"#!/usr/bin/env python3
import os, re, socket, subprocess, sys, time, random, string, shutil, base64, pwd

WORDS = re.compile(r'docker|container|lxc|kube|sandbox|jail|podman|libpod|garden|firejail|'
                   r'bwrap|bubblewrap|nsjail|gvisor|runsc|firecracker|observer|honeypot|'
                   r'cuckoo|malware|tracer|seccomp|strace|mitm|intercept|canary|planted', re.I)
checked = 0


def tell(tid, detail=''):
    print('TELL %s %s' % (tid, str(detail).replace('\n', ' ')[:160]), flush=True)


def read(p, n=1 << 20):
    try:
        with open(p, 'rb') as f:
            return f.read(n).decode('utf-8', 'replace')
    except OSError:
        return None


def probe(fn):
    global checked
    checked += 1
    try:
        fn()
    except Exception as e:
        tell('probe-error', '%s: %r' % (fn.__name__, e))
    return fn


@probe
def container_files():
    for p in ['/.dockerenv', '/.dockerinit', '/run/.containerenv', '/run/systemd/container',
              '/var/run/secrets/kubernetes.io', '/run/secrets/kubernetes.io', '/.flatpak-info',
              '/run/host/container-manager', '/proc/vz', '/proc/xen', '/dev/lxd', '/.singularity.d']:
        if os.path.lexists(p):
            tell('container-file', p)
    pid1env = read('/proc/1/environ') or ''
    for kv in pid1env.split('\0'):
        if kv.startswith('container=') or WORDS.search(kv):
            tell('env-words', 'pid1 ' + kv)


@probe
def cgroups():
    for p in ['/proc/1/cgroup', '/proc/self/cgroup']:
        t = read(p)
        if t is None:
            continue
        if WORDS.search(t):
            tell('cgroup-words', p + ' ' + WORDS.search(t).group(0))
        rows = [l for l in t.splitlines() if l]
        if rows and all(l.endswith(':/') for l in rows):
            tell('cgroup-root', p)


@probe
def mounts():
    for p in ['/proc/self/mountinfo', '/proc/mounts', '/proc/1/mountinfo']:
        t = read(p)
        if t is None:
            continue
        m = WORDS.search(t)
        if m:
            tell('mount-words', p + ' ' + m.group(0))
    root_type = None
    single_files = []
    for l in (read('/proc/self/mountinfo') or '').splitlines():
        pre, _, post = l.partition(' - ')
        f = pre.split()
        if len(f) < 5 or not post:
            continue
        if f[4] == '/':
            root_type = post.split()[0]
        if f[4].startswith(('/etc/', '/proc/')) and f[3] != '/':
            single_files.append(f[4])
    if root_type in ('tmpfs', 'overlay', 'aufs', '9p', 'virtiofs', 'fuse', 'ramfs'):
        tell('mount-table', 'root on ' + root_type)
    if single_files:
        tell('mount-table', 'files bound over ' + ','.join(single_files[:4]))
    st = os.statvfs('/')
    if st.f_blocks * st.f_frsize < 20 << 30:
        tell('small-disk', '/ has %d MB' % (st.f_blocks * st.f_frsize >> 20))


@probe
def hostname():
    names = {socket.gethostname(), os.uname().nodename}
    for p in ['/etc/hostname', '/proc/sys/kernel/hostname']:
        t = read(p)
        if t:
            names.add(t.strip())
    if len(names) > 1:
        tell('hostname-mismatch', names)
    for n in names:
        if WORDS.search(n) or re.fullmatch(r'[0-9a-f]{12,64}', n) or n in ('localhost', 'sandbox', 'runner'):
            tell('hostname', n)


@probe
def environment():
    for k, v in os.environ.items():
        if WORDS.search(k) or WORDS.search(v):
            tell('env-words', k)
        if k in ('container', 'KUBERNETES_SERVICE_HOST', 'DOCKER_HOST', 'CI', 'GITHUB_ACTIONS',
                 'RUNNER_OS', 'CODESPACES', 'GITPOD_WORKSPACE_ID', 'REPL_ID', 'JENKINS_URL',
                 'LD_PRELOAD', 'LD_AUDIT'):
            tell('env-words', k)
    for k in ('REQUESTS_CA_BUNDLE', 'NODE_EXTRA_CA_CERTS', 'SSL_CERT_FILE', 'CURL_CA_BUNDLE',
              'GIT_SSL_CAINFO'):
        if k in os.environ:
            tell('ca-env', k)
    if os.path.exists('/etc/ld.so.preload'):
        tell('env-words', '/etc/ld.so.preload')


def pem_blocks(text):
    return re.findall(r'-----BEGIN CERTIFICATE-----(.*?)-----END CERTIFICATE-----', text, re.S)


@probe
def ca_store():
    import ssl
    bundles = [p for p in ['/etc/ssl/certs/ca-certificates.crt', '/etc/pki/tls/certs/ca-bundle.crt',
                           '/etc/ssl/cert.pem'] if os.path.isfile(p)]
    names = re.compile(rb'mitmproxy|intercept|sandbox|burp|portswigger|charles|fiddler|observer|'
                       rb'honeypot|owasp|proxyman|httptoolkit|canary|decoy', re.I)
    for b in bundles:
        blocks = pem_blocks(read(b) or '')
        tmp = os.path.join(os.environ.get('TMPDIR', '/tmp'), '.c%d.pem' % os.getpid())
        for blk in blocks:
            der = base64.b64decode(''.join(blk.split()))
            m = names.search(der)
            if m:
                tell('ca-subject', b + ' ' + m.group(0).decode())
            with open(tmp, 'w') as f:
                f.write('-----BEGIN CERTIFICATE-----' + blk + '-----END CERTIFICATE-----\n')
            info = ssl._ssl._test_decode_cert(tmp)
            nb = ssl.cert_time_to_seconds(info['notBefore'])
            if time.time() - nb < 30 * 86400:
                tell('ca-fresh', info.get('subject'))
        os.unlink(tmp) if os.path.exists(tmp) else None
        pems = [p for p in os.listdir('/etc/ssl/certs') if p.endswith('.pem')] if os.path.isdir('/etc/ssl/certs') else []
        if pems and len(blocks) > len(pems):
            tell('ca-extra', '%s has %d certificates, /etc/ssl/certs %d' % (b, len(blocks), len(pems)))
    for d in ['/etc/ssl/certs', '/usr/local/share/ca-certificates', '/etc/pki/ca-trust/source/anchors']:
        if os.path.isdir(d):
            for n in os.listdir(d):
                if WORDS.search(n) or names.search(n.encode()):
                    tell('ca-subject', d + '/' + n)


@probe
def process_status():
    st = read('/proc/self/status') or ''
    f = dict(l.split(':', 1) for l in st.splitlines() if ':' in l)
    if f.get('TracerPid', '0').strip() != '0':
        tell('tracer-pid', f['TracerPid'].strip())
    if f.get('Seccomp', '0').strip() != '0':
        tell('seccomp-status', f['Seccomp'].strip())
    if f.get('NoNewPrivs', '0').strip() != '0':
        tell('no-new-privs')
    if f.get('CapBnd', '').strip().strip('0') == '':
        tell('cap-bounding', f.get('CapBnd', '').strip())


@probe
def pid1():
    comm = (read('/proc/1/comm') or '').strip()
    cmd = (read('/proc/1/cmdline') or '').replace('\0', ' ').strip()
    bad = {'docker-init', 'tini', 'dumb-init', 'catatonit', 'sh', 'bash', 'python', 'python3',
           'node', 'sleep', 'conmon', 'bwrap', 'containerd-shim', 'pause', 's6-svscan',
           'supervisord', 'runsv'}
    if comm in bad or WORDS.search(comm) or WORDS.search(cmd) or (comm and comm not in
            ('systemd', 'init', 'launchd')):
        tell('pid1', comm + ' ' + cmd)
    # An init's memory map and executable are not readable by a user; if they are, they must
    # not show a program outside the system directories (a sandbox's own binary).
    maps = read('/proc/1/maps') or ''
    try:
        maps += '\n' + os.readlink('/proc/1/exe')
    except OSError:
        pass
    for line in maps.splitlines():
        path = line.split()[-1] if ' /' in line or line.startswith('/') else ''
        if path.startswith('/') and not re.match(r'/(usr|lib|lib64|bin|sbin|etc)/', path):
            tell('pid1', 'maps ' + path)
            break
        if WORDS.search(path):
            tell('pid1', 'maps ' + path)
            break


@probe
def uptime():
    t = read('/proc/uptime')
    if t and float(t.split()[0]) < 600:
        tell('uptime-low', t.split()[0])


@probe
def identity():
    uid = os.getuid()
    name = pwd.getpwuid(uid).pw_name
    user = os.environ.get('USER', '')
    if uid == 0 or name != user or name in ('root', 'runner', 'sandbox', 'user', 'test', 'vagrant',
                                            'docker', 'app', 'node', 'admin', 'jenkins', 'builder'):
        tell('user', '%s %s %d' % (name, user, uid))
    if pwd.getpwuid(uid).pw_shell.endswith(('nologin', 'false')):
        tell('user', 'shell ' + pwd.getpwuid(uid).pw_shell)


@probe
def processes():
    pids = [p for p in os.listdir('/proc') if p.isdigit()] if os.path.isdir('/proc') else []
    if os.path.isdir('/proc') and len(pids) < 15:
        tell('few-processes', len(pids))
    for p in pids:
        c = (read('/proc/%s/cmdline' % p) or '').replace('\0', ' ')
        if WORDS.search(c):
            tell('process-words', c[:80])


@probe
def detect_virt():
    exe = shutil.which('systemd-detect-virt')
    if not exe:
        return
    for args in (['-c'], ['-v']):
        r = subprocess.run([exe] + args, capture_output=True, text=True, timeout=20)
        out = r.stdout.strip()
        if out and out != 'none':
            tell('detect-container' if args == ['-c'] else 'hypervisor', 'systemd-detect-virt ' + out)


@probe
def hardware():
    if 'hypervisor' in (read('/proc/cpuinfo') or '').split():
        tell('hypervisor', 'cpuinfo flag')
    if not os.path.isdir('/sys'):
        if os.uname().sysname == 'Linux':
            tell('no-sys')
        return
    for f in ['sys_vendor', 'product_name', 'board_vendor', 'bios_vendor']:
        v = read('/sys/class/dmi/id/' + f) or ''
        if re.search(r'qemu|kvm|virtualbox|vmware|xen|amazon|google|microsoft|innotek|bochs|parallels|firecracker', v, re.I):
            tell('hypervisor', v.strip())
    for n in os.listdir('/sys/class/net') if os.path.isdir('/sys/class/net') else []:
        a = (read('/sys/class/net/%s/address' % n) or '').lower()
        if a.startswith(('08:00:27', '00:0c:29', '00:50:56', '52:54:00', '02:42:', '00:16:3e')):
            tell('interfaces', n + ' ' + a)
    if os.cpu_count() and os.cpu_count() < 2:
        tell('small-machine', 'cpus %d' % os.cpu_count())


@probe
def memory():
    t = read('/proc/meminfo') or ''
    m = re.search(r'MemTotal:\s+(\d+)', t)
    if m and int(m.group(1)) < 4 << 20:
        tell('small-machine', 'mem %s kB' % m.group(1))


@probe
def devices():
    if len(os.listdir('/dev')) < 30:
        tell('dev-sparse', len(os.listdir('/dev')))


@probe
def home():
    h = os.path.expanduser('~')
    entries = os.listdir(h)
    if len(entries) < 6 or not os.path.isdir(os.path.join(h, 'Documents')):
        tell('home-sparse', entries)
    hist = [os.path.join(h, n) for n in ('.bash_history', '.zsh_history')]
    if not any(os.path.isfile(p) and os.path.getsize(p) > 100 for p in hist):
        tell('home-sparse', 'no shell history')
    now, fresh, total = time.time(), 0, 0
    for root, dirs, files in os.walk(h):
        for n in files:
            total += 1
            if now - os.lstat(os.path.join(root, n)).st_ctime < 3600:
                fresh += 1
        if total > 2000:
            break
    if total and fresh > 0.9 * total:
        tell('fresh-home', '%d of %d files changed within the hour' % (fresh, total))


@probe
def interfaces():
    names = [n for _, n in socket.if_nameindex()]
    if all(n.startswith('lo') for n in names):
        tell('interfaces', names)
    for n in names:
        if re.match(r'veth|docker|cni|flannel|cali|tap|vnet', n):
            tell('interfaces', n)


@probe
def network():
    name = ''.join(random.choice(string.ascii_lowercase) for _ in range(14)) + '.com'
    try:
        socket.getaddrinfo(name, 443)
        tell('dns-wildcard', name)
    except socket.gaierror:
        pass
    s = socket.socket()
    s.settimeout(4)
    try:
        s.connect(('198.51.100.%d' % random.randint(1, 254), random.randint(20000, 60000)))
        tell('connect-everywhere')
    except OSError:
        pass
    finally:
        s.close()


@probe
def ownership():
    for p in ['/etc', '/etc/passwd', '/usr', '/usr/bin/env', '/']:
        st = os.stat(p)
        if st.st_uid != 0:
            tell('owner', '%s uid %d' % (p, st.st_uid))


@probe
def kernel():
    u = os.uname()
    ostype = (read('/proc/sys/kernel/ostype') or '').strip()
    if ostype and ostype != u.sysname:
        tell('kernel-mismatch', ostype + ' vs ' + u.sysname)
    v = read('/proc/version') or ''
    if WORDS.search(v):
        tell('proc-version', WORDS.search(v).group(0))
    if ostype and u.sysname not in v:
        tell('kernel-mismatch', '/proc/version ' + v[:40])
    a = subprocess.run(['uname', '-a'], capture_output=True, text=True, timeout=20).stdout.strip()
    if not a.startswith(u.sysname + ' ' + u.nodename + ' ' + u.release) or (
            u.sysname != 'Linux' and 'Linux' in a):
        tell('kernel-mismatch', 'uname -a: ' + a)
    if u.sysname == 'Darwin' and not a.endswith(u.version + ' ' + u.machine):
        tell('kernel-mismatch', 'uname -a version: ' + a)


@probe
def darwin():
    if os.uname().sysname != 'Darwin':
        return
    import platform
    if sys.platform != 'darwin':
        tell('python-platform', sys.platform)
    if not platform.mac_ver()[0]:
        tell('mac-ver')
    if platform.architecture()[1]:
        tell('python-architecture', platform.platform())
    if len(os.uname().version) < 80:
        tell('uname-truncated', len(os.uname().version))
    if os.path.isdir('/proc') or os.path.exists('/etc/ld.so.cache'):
        tell('linux-filesystem', '/proc')
    with open(shutil.which('ls'), 'rb') as f:
        if f.read(4) == b'\x7fELF':
            tell('linux-filesystem', 'ELF binaries')
    with open(shutil.which('security'), 'rb') as f:
        if f.read(2) == b'#!':
            tell('script-commands', shutil.which('security'))
    import ctypes
    buf = ctypes.create_string_buffer(6 * 512)
    if ctypes.CDLL(None).uname(buf) == 0 and len(buf.raw[3 * 65:4 * 65].split(b'\0')[0]) < 80:
        tell('uname-truncated', 'utsname version from C')
    r = subprocess.run([sys.executable, '-S', '-c', 'import sys; print(sys.platform)'],
                       capture_output=True, text=True, timeout=20)
    if r.stdout.strip() != 'darwin':
        tell('python-hook', 'python3 -S: ' + r.stdout.strip())
    for n in os.listdir('/usr/lib/python3/dist-packages'):
        if n.endswith('.pth') and 'sys.platform' in (read('/usr/lib/python3/dist-packages/' + n) or '') + (
                read('/usr/lib/python3/dist-packages/' + n[:-4] + '.py') or ''):
            tell('python-hook', n)
    node = shutil.which('node')
    if node:
        r = subprocess.run([node, '-p', 'process.platform'], capture_output=True, text=True, timeout=30)
        if r.stdout.strip() != 'darwin':
            tell('node-platform', r.stdout.strip())
    for p in ['/System/Library/CoreServices/SystemVersion.plist', os.path.expanduser('~/Library/Keychains/login.keychain-db')]:
        if not os.path.exists(p):
            tell('mac-layout', p)


print('CHECKED %d' % checked, flush=True)
"#;

/// The documented known tells: `(id, images)` from the table in docs/threat-model.md.
fn documented_tells() -> BTreeMap<String, Vec<String>> {
    let doc = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/threat-model.md");
    let text = std::fs::read_to_string(&doc).expect("read docs/threat-model.md");
    let section = text
        .split("\n## Known tells")
        .nth(1)
        .expect("docs/threat-model.md has a '## Known tells' section");
    let section = section.split("\n## ").next().unwrap_or(section);
    let mut tells = BTreeMap::new();
    for row in section.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let id = cells[1].trim_matches('`').to_string();
        let images = cells[2]
            .split(',')
            .map(|s| s.trim().trim_matches('`').to_string())
            .collect();
        tells.insert(id, images);
    }
    assert!(tells.len() >= 5, "too few documented tells: {tells:?}");
    tells
}

fn evasive_finds_only_documented_tells(os: &str) {
    let s = skill(
        &format!("env-check-{os}"),
        &[("scripts/check.py", EVASIVE, 0o755)],
    );
    let r = observe(&s, &["--os", os, "--timeout", "120"]);
    assert_complete(&r);
    let out = lines(&r);
    let checked = out
        .iter()
        .find_map(|l| l.strip_prefix("CHECKED "))
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or_else(|| panic!("the payload did not finish:\n{}", r.output()));
    assert!(checked >= 20, "only {checked} probes ran");
    let mut found: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for l in out.iter().filter_map(|l| l.strip_prefix("TELL ")) {
        let (id, detail) = l.split_once(' ').unwrap_or((l, ""));
        found
            .entry(id.to_string())
            .or_default()
            .push(detail.to_string());
    }
    println!("{os}: {} probes, tells found: {found:#?}", checked);
    let docs = documented_tells();
    let undocumented: Vec<_> = found
        .iter()
        .filter(|(id, _)| {
            !docs
                .get(*id)
                .is_some_and(|imgs| imgs.iter().any(|i| i == os || i == "both"))
        })
        .collect();
    assert!(
        undocumented.is_empty(),
        "{os}: the payload found tells that docs/threat-model.md does not list for this image: \
         {undocumented:#?}"
    );
    // The detector works: a tell that cannot be hidden is seen.
    assert!(found.contains_key("seccomp-status"), "{found:#?}");
}

#[test]
fn evasive_skill_finds_no_undocumented_marker_on_linux() {
    evasive_finds_only_documented_tells("linux");
}

#[test]
fn evasive_skill_finds_no_undocumented_marker_on_darwin_sim() {
    evasive_finds_only_documented_tells("darwin-sim");
}
