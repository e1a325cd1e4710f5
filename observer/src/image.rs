//! The filesystem and identity the skill sees: a declarative image from `sandbox-images/`
//! materialised per run (with its planted credentials), turned into what the jail builds.

use crate::jail::spec::{FsEntry, JailSpec, Limits, ProcFile, StepSpec, UnameSpec};
use crate::trace::{CredentialEnv, CredentialFile, RunContext};
use planted_creds::{Registry, Seed};
use sandbox_images::{Entry, ImageSpec, Materialized};

#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("unknown image {0:?} (linux or darwin-sim)")]
    Unknown(String),
    #[error("image definition: {0}")]
    Spec(String),
    #[error("bad --seed: {0}")]
    Seed(String),
    #[error("materialising the image: {0}")]
    Materialize(String),
}

/// A file of the skill, relative to its folder.
#[derive(Debug, Clone)]
pub struct SkillFile {
    pub path: String,
    pub data: Vec<u8>,
    pub mode: u32,
}

/// Everything about the run's user environment that the jail and the analyser need.
#[derive(Debug, Clone)]
pub struct Image {
    pub os: String,
    pub user: String,
    pub uid: u32,
    pub gid: u32,
    pub home: String,
    pub workspace: String,
    pub skill_dir: String,
    pub hostname: String,
    pub env: Vec<(String, String)>,
    pub entries: Vec<FsEntry>,
    pub ro_binds: Vec<String>,
    pub overlay_dirs: Vec<String>,
    pub rw_mounts: Vec<String>,
    pub uname: Option<UnameSpec>,
    pub shims: Vec<String>,
    /// Files bound over the jail's `/proc` (see [`proc_files`]).
    pub proc_files: Vec<ProcFile>,
    pub context: RunContext,
    /// Every planted value, for the egress canary search.
    pub registry: Registry,
    pub seed: String,
}

/// System paths bound read-only from the host. Missing ones are skipped; merged-/usr symlinks
/// are recreated as symlinks. The rest of `/etc` is synthetic (the image's account files,
/// hostname, resolver), so nothing of the host's own configuration shows.
pub const SYSTEM_BINDS: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib64",
    "/lib32",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/localtime",
    "/etc/protocols",
    "/etc/services",
    "/etc/mime.types",
    "/etc/bash.bashrc",
    "/etc/profile",
    "/etc/profile.d",
    "/etc/inputrc",
    "/etc/python3",
    "/etc/python3.11",
    "/etc/gai.conf",
    "/etc/host.conf",
    "/etc/os-release",
    "/etc/debian_version",
    "/etc/terminfo",
    "/etc/nsswitch.conf",
    "/etc/magic",
    "/etc/perl",
    "/etc/wgetrc",
    "/etc/login.defs",
    "/etc/shells",
];

/// `/bin/zsh` → `/usr/bin/zsh` when the host's `/bin` is a merged-/usr symlink: entries must land
/// where the bind (or overlay) really is.
fn through_host_symlinks(path: &str) -> String {
    let rest = path.trim_start_matches('/');
    let (first, tail) = rest.split_once('/').unwrap_or((rest, ""));
    if tail.is_empty() {
        return path.to_string();
    }
    let top = format!("/{first}");
    if SYSTEM_BINDS.contains(&top.as_str()) {
        if let Ok(target) = std::fs::read_link(&top) {
            let t = target.to_string_lossy();
            if !t.starts_with('/') && !t.contains("..") {
                return format!("/{}/{tail}", t.trim_end_matches('/'));
            }
        }
    }
    path.to_string()
}

/// Host files that only a Linux system has; darwin-sim does not bind them.
const LINUX_ONLY: &[&str] = &["/etc/os-release", "/etc/debian_version"];

/// Words that name a build farm, sandbox or container when a host kernel's builder string
/// carries one (besides [`planted_creds::TELL_WORDS`]).
const BUILDER_TELLS: &[&str] = &[
    "sandbox",
    "container",
    "docker",
    "podman",
    "lxc",
    "kube",
    "firecracker",
    "gvisor",
    "jail",
    "vm",
];

/// What the jail's `/proc` says about the kernel. Under an emulated `uname` the kernel's own
/// name, release and version files answer the same as the syscall; on Linux only the builder in
/// `/proc/version` is replaced, and only when it names a sandbox or build farm (`host_version`
/// is the host's `/proc/version`).
pub fn proc_files(uname: Option<&UnameSpec>, host_version: &str) -> Vec<ProcFile> {
    let file = |path: &str, text: String| ProcFile {
        path: path.into(),
        data: text.into_bytes(),
    };
    if let Some(u) = uname {
        return vec![
            file("/proc/sys/kernel/ostype", format!("{}\n", u.sysname)),
            file("/proc/sys/kernel/osrelease", format!("{}\n", u.release)),
            file("/proc/sys/kernel/version", format!("{}\n", u.version)),
            file("/proc/version", format!("{}\n", u.version)),
        ];
    }
    // "Linux version R (builder) (compiler) V": the builder is the first parenthesised group.
    let Some(open) = host_version.find(" (") else {
        return Vec::new();
    };
    let Some(len) = host_version[open + 2..].find(')') else {
        return Vec::new();
    };
    let builder = &host_version[open + 2..open + 2 + len];
    let lower = builder.to_ascii_lowercase();
    let tells = planted_creds::find_tell(builder.as_bytes()).is_some()
        || BUILDER_TELLS.iter().any(|w| lower.contains(w));
    if !tells {
        return Vec::new();
    }
    let mut v = String::with_capacity(host_version.len());
    v.push_str(&host_version[..open + 2]);
    v.push_str("buildd@lcy02-amd64-044");
    v.push_str(&host_version[open + 2 + len..]);
    if !v.ends_with('\n') {
        v.push('\n');
    }
    vec![file("/proc/version", v)]
}

fn to_fs_entry(e: &Entry) -> FsEntry {
    match e {
        Entry::Dir { path, mode, mtime } => FsEntry::Dir {
            path: through_host_symlinks(path),
            mode: *mode,
            mtime: Some(*mtime),
        },
        Entry::File {
            path,
            bytes,
            mode,
            mtime,
        } => FsEntry::File {
            path: through_host_symlinks(path),
            mode: *mode,
            data: bytes.clone(),
            mtime: Some(*mtime),
        },
        Entry::Symlink { path, target } => FsEntry::Symlink {
            path: through_host_symlinks(path),
            target: target.clone(),
        },
    }
}

fn fs_path(e: &FsEntry) -> &str {
    match e {
        FsEntry::Dir { path, .. }
        | FsEntry::File { path, .. }
        | FsEntry::Symlink { path, .. }
        | FsEntry::Whiteout { path } => path,
    }
}

/// Host directories where a machine's own tooling drops files (trust anchors, interpreter
/// start-up hooks, local commands); the jail binds them, so a name there is visible inside.
const HOST_SCAN_DIRS: &[&str] = &[
    "/etc/ssl/certs",
    "/usr/local/share/ca-certificates",
    "/usr/share/ca-certificates",
    "/usr/local/bin",
    "/usr/local/sbin",
    "/usr/lib/python3/dist-packages",
];

/// Words that, in a host file's name or link target, would tell a skill it is watched. Narrower
/// than [`planted_creds::TELL_WORDS`]: `mock`, `fake` and `shim` name ordinary packages
/// (python3-mock, faker) that must stay importable.
const HOST_HIDE_WORDS: &[&str] = &[
    "sandbox",
    "jail",
    "honeypot",
    "honeytoken",
    "canary",
    "tripwire",
    "decoy",
    "observer",
];

fn has_hide_word(bytes: &[u8]) -> bool {
    HOST_HIDE_WORDS.iter().any(|w| {
        bytes
            .windows(w.len())
            .any(|win| win.eq_ignore_ascii_case(w.as_bytes()))
    })
}

/// Which directory entries to hide: those whose name or symlink target carries a hide word.
/// `entries` are `(name, link target)` of one directory.
pub fn names_to_hide(entries: &[(String, Option<String>)]) -> Vec<String> {
    let tells = |s: &str| has_hide_word(s.as_bytes());
    entries
        .iter()
        .filter(|(n, t)| tells(n) || t.as_deref().is_some_and(tells))
        .map(|(n, _)| n.clone())
        .collect()
}

const PEM_BEGIN: &str = "-----BEGIN CERTIFICATE-----";
const PEM_END: &str = "-----END CERTIFICATE-----";

fn pem_der(block: &str) -> Option<Vec<u8>> {
    use base64::Engine;
    let body = block.strip_prefix(PEM_BEGIN)?.strip_suffix(PEM_END)?;
    let b64: String = body.split_whitespace().collect();
    base64::engine::general_purpose::STANDARD.decode(b64).ok()
}

/// The host's trust bundle without the certificates whose names carry a hide word (a worker's
/// own interception CA): text outside certificates is kept, certificates are kept verbatim.
pub fn clean_bundle(bundle: &str) -> String {
    let mut out = String::with_capacity(bundle.len());
    let mut rest = bundle;
    while let Some(start) = rest.find(PEM_BEGIN) {
        let Some(len) = rest[start..].find(PEM_END) else {
            break;
        };
        let end = start + len + PEM_END.len();
        let with_nl = end + usize::from(rest[end..].starts_with('\n'));
        out.push_str(&rest[..start]);
        if !pem_der(&rest[start..end]).is_some_and(|der| has_hide_word(&der)) {
            out.push_str(&rest[start..with_nl]);
        }
        rest = &rest[with_nl..];
    }
    out.push_str(rest);
    out
}

/// The common name of a certificate (the first CN in its DER, the issuer's; a root's subject is
/// the same), for naming its file the way `update-ca-certificates` does.
pub fn cert_common_name(pem: &str) -> Option<String> {
    let start = pem.find(PEM_BEGIN)?;
    let end = pem[start..].find(PEM_END)? + start + PEM_END.len();
    let der = pem_der(&pem[start..end])?;
    const CN_OID: &[u8] = &[0x06, 0x03, 0x55, 0x04, 0x03];
    let at = der.windows(CN_OID.len()).position(|w| w == CN_OID)? + CN_OID.len();
    let len = usize::from(*der.get(at + 1)?);
    if len >= 0x80 {
        return None;
    }
    let name = std::str::from_utf8(der.get(at + 2..at + 2 + len)?).ok()?;
    let file: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    (!file.is_empty()).then_some(file)
}

/// Host files to hide from the jail (see [`HOST_SCAN_DIRS`]; also every Python's
/// `site-packages`/`dist-packages` under `/usr/local/lib` and `/usr/lib`).
fn host_entries_to_hide() -> Vec<String> {
    let mut dirs: Vec<String> = HOST_SCAN_DIRS.iter().map(|s| s.to_string()).collect();
    for lib in ["/usr/local/lib", "/usr/lib"] {
        for e in std::fs::read_dir(lib).into_iter().flatten().flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if n.starts_with("python3") {
                dirs.push(format!("{lib}/{n}/dist-packages"));
                dirs.push(format!("{lib}/{n}/site-packages"));
            }
        }
    }
    let mut hide = Vec::new();
    for d in dirs {
        let entries: Vec<(String, Option<String>)> = std::fs::read_dir(&d)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| {
                let target = std::fs::read_link(e.path())
                    .ok()
                    .map(|t| t.to_string_lossy().into_owned());
                (e.file_name().to_string_lossy().into_owned(), target)
            })
            .collect();
        hide.extend(
            names_to_hide(&entries)
                .into_iter()
                .map(|n| format!("{d}/{n}")),
        );
    }
    hide
}

fn under(path: &str, dir: &str) -> bool {
    path == dir || path.strip_prefix(dir).is_some_and(|r| r.starts_with('/'))
}

/// Turns a materialised image into the jail's view of it.
pub fn from_materialized(m: Materialized) -> Image {
    let mut entries: Vec<FsEntry> = m.entries.iter().map(to_fs_entry).collect();
    // A stub resolver, as on a current desktop; queries to any resolver reach our DNS server.
    if !entries.iter().any(|e| fs_path(e) == "/etc/resolv.conf") {
        entries.push(FsEntry::File {
            path: "/etc/resolv.conf".into(),
            mode: 0o644,
            data: b"nameserver 127.0.0.53\noptions edns0 trust-ad\nsearch lan\n".to_vec(),
            mtime: Some(m.now),
        });
    }
    // Host files whose names would give the jail away are hidden (whiteouts in the overlay of
    // their bound directory), unless the image puts its own file there.
    for path in host_entries_to_hide() {
        let path = through_host_symlinks(&path);
        if !entries.iter().any(|e| under(fs_path(e), &path)) {
            entries.push(FsEntry::Whiteout { path });
        }
    }
    // The image's own files win over host binds of the same path (e.g. /etc/shells).
    let darwin = m.uname.is_some();
    let ro_binds: Vec<String> = SYSTEM_BINDS
        .iter()
        .filter(|b| {
            !b.starts_with("/etc/")
                || !entries
                    .iter()
                    .any(|e| !matches!(e, FsEntry::Whiteout { .. }) && under(fs_path(e), b))
        })
        .filter(|b| !darwin || !LINUX_ONLY.contains(b))
        .map(|s| s.to_string())
        .collect();
    // Entries inside a bound directory (other than /etc, which is synthetic, unless they hide a
    // host file) need an overlay.
    let mut overlay_dirs: Vec<String> = Vec::new();
    for e in &entries {
        let p = fs_path(e);
        let hides = matches!(e, FsEntry::Whiteout { .. });
        if let Some(d) = ro_binds
            .iter()
            .find(|b| (hides || !b.starts_with("/etc")) && under(p, b) && p != b.as_str())
        {
            if !overlay_dirs.contains(d) {
                overlay_dirs.push(d.clone());
            }
        }
    }
    let c = m.context;
    let context = RunContext {
        home: c.home,
        workspace: c.workspace,
        skill_dir: c.skill_dir,
        other_skill_dirs: c.other_skill_dirs,
        agent_files: c.agent_files,
        temp_dirs: c.temp_dirs,
        path_dirs: c.path_dirs,
        credential_files: c
            .credential_files
            .into_iter()
            .map(|f| CredentialFile {
                path: f.path,
                credential: f.credential,
                service_hosts: f.service_hosts,
            })
            .collect(),
        credential_env: c
            .credential_env
            .into_iter()
            .map(|e| CredentialEnv {
                name: e.name,
                credential: e.credential,
                service_hosts: e.service_hosts,
            })
            .collect(),
        creds_seed: c.creds_seed.or_else(|| Some(m.seed.clone())),
    };
    let uname = m.uname.map(|u| UnameSpec {
        sysname: u.sysname,
        nodename: u.nodename,
        release: u.release,
        version: u.version,
        machine: u.machine,
    });
    let host_version = std::fs::read_to_string("/proc/version").unwrap_or_default();
    let proc_files = proc_files(uname.as_ref(), &host_version);
    let home_root = m
        .home
        .trim_start_matches('/')
        .split('/')
        .next()
        .map(|s| format!("/{s}"))
        .unwrap_or_else(|| "/home".into());
    // The image's temporary directories are writable as on the real system (macOS's per-user
    // `$TMPDIR` under /var/folders, `/private/tmp`), each on its own tmpfs.
    let mut rw_mounts = vec![home_root, "/tmp".into(), "/var/tmp".into()];
    for t in &context.temp_dirs {
        let inside_system = SYSTEM_BINDS.iter().any(|b| under(t, b));
        if t.starts_with('/') && !inside_system && !rw_mounts.iter().any(|r| under(t, r)) {
            rw_mounts.push(t.clone());
        }
    }
    Image {
        os: if uname.is_some() {
            "darwin-sim".into()
        } else {
            "linux".into()
        },
        user: m.user,
        uid: m.uid,
        gid: m.gid,
        home: m.home,
        workspace: m.workspace,
        skill_dir: m.skill_dir,
        hostname: m.hostname,
        env: m.env,
        entries,
        ro_binds,
        overlay_dirs,
        rw_mounts,
        uname,
        shims: m
            .commands
            .iter()
            .map(|p| through_host_symlinks(p))
            .collect(),
        proc_files,
        context,
        registry: m.registry,
        seed: m.seed,
    }
}

/// The bare image's user ids.
pub const BARE_IDS: (u32, u32) = (1000, 1000);

/// The jail alone, for measuring it (`observe jail-exec --bare`): the system binds, a synthetic
/// account, an empty home and workspace on tmpfs, and nothing planted.
pub fn bare() -> Image {
    let (user, (uid, gid)) = ("user".to_string(), BARE_IDS);
    let home = format!("/home/{user}");
    let workspace = format!("{home}/work");
    let file = |path: &str, data: String| FsEntry::File {
        path: path.into(),
        mode: 0o644,
        data: data.into_bytes(),
        mtime: None,
    };
    let dir = |path: &str| FsEntry::Dir {
        path: path.into(),
        mode: 0o755,
        mtime: None,
    };
    let entries = vec![
        file(
            "/etc/passwd",
            format!("root:x:0:0:root:/root:/bin/sh\n{user}:x:{uid}:{gid}::{home}:/bin/sh\n"),
        ),
        file("/etc/group", format!("root:x:0:\n{user}:x:{gid}:\n")),
        file("/etc/hostname", "host\n".into()),
        dir(&home),
        dir(&workspace),
    ];
    let ro_binds = SYSTEM_BINDS
        .iter()
        .filter(|b| !b.starts_with("/etc/") || *b == &"/etc/ld.so.cache")
        .map(|s| s.to_string())
        .collect();
    Image {
        os: "linux".into(),
        env: vec![
            ("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()),
            ("HOME".into(), home.clone()),
            ("USER".into(), user.clone()),
        ],
        user,
        uid,
        gid,
        skill_dir: format!("{home}/.claude/skills/bare"),
        home,
        workspace,
        hostname: "host".into(),
        entries,
        ro_binds,
        overlay_dirs: Vec::new(),
        rw_mounts: vec!["/home".into(), "/tmp".into()],
        uname: None,
        shims: Vec::new(),
        proc_files: Vec::new(),
        context: RunContext::default(),
        registry: Registry::default(),
        seed: String::new(),
    }
}

/// Materialises image `os` (`linux` or `darwin-sim`) with the skill installed, from `seed` (a
/// fresh random one when `None`).
pub fn build(
    os: &str,
    skill_name: &str,
    skill_files: &[SkillFile],
    seed: Option<&str>,
) -> Result<Image, ImageError> {
    build_from(&load(os)?, skill_name, skill_files, seed)
}

/// The definition of image `os` (`linux` or `darwin-sim`).
pub fn load(os: &str) -> Result<ImageSpec, ImageError> {
    ImageSpec::builtin(os).map_err(|e| match e {
        sandbox_images::SpecError::Unknown(n) => ImageError::Unknown(n),
        e => ImageError::Spec(e.to_string()),
    })
}

/// The user ids of the image `spec` defines (known before it is built: the jail process is
/// started with them).
pub fn ids(spec: &ImageSpec) -> (u32, u32) {
    (spec.identity.uid, spec.identity.gid)
}

/// [`build`] from a loaded definition.
pub fn build_from(
    spec: &ImageSpec,
    skill_name: &str,
    skill_files: &[SkillFile],
    seed: Option<&str>,
) -> Result<Image, ImageError> {
    let seed: Seed = match seed {
        Some(s) => s
            .parse()
            .map_err(|e: planted_creds::SeedError| ImageError::Seed(e.to_string()))?,
        None => Seed::random().map_err(|e| ImageError::Seed(e.to_string()))?,
    };
    let files: Vec<(String, Vec<u8>, u32)> = skill_files
        .iter()
        .map(|f| (f.path.clone(), f.data.clone(), f.mode))
        .collect();
    let m = sandbox_images::materialize(spec, skill_name, &files, &seed)
        .map_err(|e| ImageError::Materialize(e.to_string()))?;
    Ok(from_materialized(m))
}

/// The host's system trust bundle without the certificates that would give the jail away.
pub fn host_bundle() -> String {
    let host = std::fs::read(SYSTEM_CA_BUNDLE).unwrap_or_default();
    clean_bundle(&String::from_utf8_lossy(&host))
}

/// Where Debian-family systems keep the system trust bundle.
pub const SYSTEM_CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

impl Image {
    /// Makes the jail trust `pem` (the run's interception CA) the way a managed machine does: in
    /// the system bundle at its usual path (the host's bundle plus ours, on an overlay of
    /// `/etc/ssl`) and in the variables clients consult. `host_bundle` is [`host_bundle`]'s
    /// result (the run reads it while the image is built).
    pub fn trust_ca(&mut self, host_bundle: String, pem: &str) {
        let mut bundle = host_bundle.into_bytes();
        if !bundle.is_empty() && !bundle.ends_with(b"\n") {
            bundle.push(b'\n');
        }
        bundle.extend_from_slice(pem.as_bytes());
        self.entries.push(FsEntry::File {
            path: SYSTEM_CA_BUNDLE.into(),
            mode: 0o644,
            data: bundle,
            mtime: None,
        });
        // Installed the way a managed machine installs its inspection root, so the bundle holds
        // no certificate that the directory lacks.
        if let Some(name) = cert_common_name(pem) {
            self.entries.push(FsEntry::File {
                path: format!("/etc/ssl/certs/{name}.pem"),
                mode: 0o644,
                data: pem.as_bytes().to_vec(),
                mtime: None,
            });
        }
        if self.ro_binds.iter().any(|b| b == "/etc/ssl")
            && !self.overlay_dirs.iter().any(|d| d == "/etc/ssl")
        {
            self.overlay_dirs.push("/etc/ssl".into());
        }
        for var in [
            "SSL_CERT_FILE",
            "REQUESTS_CA_BUNDLE",
            "NODE_EXTRA_CA_CERTS",
            "CURL_CA_BUNDLE",
            "GIT_SSL_CAINFO",
        ] {
            self.env.retain(|(k, _)| k != var);
            self.env.push((var.into(), SYSTEM_CA_BUNDLE.into()));
        }
    }

    pub fn jail_spec(
        &self,
        staging: String,
        steps: Vec<StepSpec>,
        limits: Limits,
        grace_ms: u64,
        t0_ns: u64,
    ) -> JailSpec {
        JailSpec {
            t0_ns,
            staging,
            // The kernel's own hostname (`/proc/sys/kernel/hostname`) agrees with the emulated
            // uname's nodename.
            hostname: self
                .uname
                .as_ref()
                .map_or_else(|| self.hostname.clone(), |u| u.nodename.clone()),
            uid: self.uid,
            gid: self.gid,
            home: self.home.clone(),
            env: self.env.clone(),
            ro_binds: self.ro_binds.clone(),
            entries: self.entries.clone(),
            rw_mounts: self.rw_mounts.clone(),
            steps,
            limits,
            grace_ms,
            extra_notify: if self.uname.is_some() {
                vec![libc::SYS_uname]
            } else {
                Vec::new()
            },
            overlay_dirs: self.overlay_dirs.clone(),
            uname: self.uname.clone(),
            shims: self.shims.clone(),
            proc_files: self.proc_files.clone(),
            egress: false,
            traced: true,
            clock_offset_ns: 0,
            self_move: Vec::new(),
            steps_budget_ms: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn under_is_component_wise() {
        assert!(under("/usr/bin/x", "/usr"));
        assert!(under("/usr", "/usr"));
        assert!(!under("/usrlocal/x", "/usr"));
    }

    #[test]
    fn linux_image_places_skill_and_credentials() {
        let files = vec![SkillFile {
            path: "scripts/run.sh".into(),
            data: b"echo hi".to_vec(),
            mode: 0o755,
        }];
        let img = build("linux", "demo", &files, None).expect("image");
        assert!(img.skill_dir.ends_with("/.claude/skills/demo"));
        assert!(img
            .entries
            .iter()
            .any(|e| fs_path(e) == format!("{}/scripts/run.sh", img.skill_dir)));
        assert!(!img.context.credential_files.is_empty());
        assert!(img.uname.is_none());
        assert!(matches!(
            build("beos", "demo", &files, None),
            Err(ImageError::Unknown(_))
        ));
    }

    #[test]
    fn host_names_that_give_the_jail_away_are_hidden_and_ordinary_packages_kept() {
        let e = |n: &str, t: Option<&str>| (n.to_string(), t.map(str::to_string));
        let hide = names_to_hide(&[
            e("sandboxing-egress-ca.pem", None),
            e("6f7d0a94.0", Some("sandboxing-egress-ca.pem")),
            e("_Observer_Hook.pth", None),
            e("mock", None),
            e("faker", None),
            e("ca-certificates.crt", None),
            e(
                "ISRG_Root_X1.pem",
                Some("/usr/share/ca-certificates/mozilla/ISRG_Root_X1.crt"),
            ),
        ]);
        assert_eq!(
            hide,
            vec![
                "sandboxing-egress-ca.pem",
                "6f7d0a94.0",
                "_Observer_Hook.pth"
            ]
        );
    }

    fn pem(der: &[u8]) -> String {
        use base64::Engine;
        let b = base64::engine::general_purpose::STANDARD.encode(der);
        format!("{PEM_BEGIN}\n{b}\n{PEM_END}\n")
    }

    #[test]
    fn bundle_loses_certificates_that_name_a_sandbox_and_keeps_the_rest() {
        let cn = |name: &str| {
            let mut d = vec![
                0x30,
                0x10,
                0x06,
                0x03,
                0x55,
                0x04,
                0x03,
                0x0c,
                name.len() as u8,
            ];
            d.extend_from_slice(name.as_bytes());
            d
        };
        let a = pem(&cn("ISRG Root X1"));
        let bad = pem(&cn("Sandboxing Egress CA"));
        let b = pem(&cn("DigiCert Global Root G2"));
        let bundle = format!("{a}{bad}{b}");
        assert_eq!(clean_bundle(&bundle), format!("{a}{b}"));
        assert_eq!(clean_bundle(&format!("{a}{b}")), format!("{a}{b}"));
        assert_eq!(clean_bundle("junk"), "junk");
        assert_eq!(cert_common_name(&a).as_deref(), Some("ISRG_Root_X1"));
        assert_eq!(cert_common_name("nothing"), None);
    }

    #[test]
    fn proc_files_follow_the_emulated_uname_and_hide_a_telling_builder() {
        let u = UnameSpec {
            sysname: "Darwin".into(),
            nodename: "m".into(),
            release: "24.5.0".into(),
            version: "Darwin Kernel Version 24.5.0".into(),
            machine: "arm64".into(),
        };
        let f = proc_files(Some(&u), "Linux version 6.1 (x@y) (gcc) #1\n");
        let get = |f: &[ProcFile], p: &str| {
            f.iter()
                .find(|x| x.path == p)
                .map(|x| String::from_utf8_lossy(&x.data).into_owned())
        };
        assert_eq!(
            get(&f, "/proc/sys/kernel/ostype").as_deref(),
            Some("Darwin\n")
        );
        assert_eq!(
            get(&f, "/proc/version").as_deref(),
            Some("Darwin Kernel Version 24.5.0\n")
        );
        let host = "Linux version 6.18.44-fc (builder@sandboxing) (gcc (GCC) 15.3.0) #1 SMP @0\n";
        let f = proc_files(None, host);
        assert_eq!(
            get(&f, "/proc/version").as_deref(),
            Some(
                "Linux version 6.18.44-fc (buildd@lcy02-amd64-044) (gcc (GCC) 15.3.0) #1 SMP @0\n"
            )
        );
        let debian = "Linux version 6.1.0-18-amd64 (debian-kernel@lists.debian.org) (gcc-12) #1\n";
        assert!(proc_files(None, debian).is_empty());
        assert!(proc_files(None, "garbage").is_empty());
        assert!(proc_files(None, "Linux version 6 (unclosed").is_empty());
    }

    #[test]
    fn darwin_image_overlays_usr_for_its_commands() {
        let img = build("darwin-sim", "demo", &[], None).expect("image");
        assert_eq!(
            img.uname.as_ref().map(|u| u.sysname.as_str()),
            Some("Darwin")
        );
        assert!(
            img.shims.iter().any(|s| s.ends_with("/security")),
            "{:?}",
            img.shims
        );
        assert!(
            img.overlay_dirs.iter().any(|d| d == "/usr"),
            "{:?}",
            img.overlay_dirs
        );
        assert!(img.home.starts_with("/Users/"));
        assert!(img.rw_mounts.contains(&"/Users".to_string()));
        // $TMPDIR (/var/folders/…/T) and /private/tmp are writable.
        let tmpdir = img
            .env
            .iter()
            .find(|(k, _)| k == "TMPDIR")
            .map(|(_, v)| v.trim_end_matches('/').to_string())
            .expect("TMPDIR");
        assert!(img.rw_mounts.contains(&tmpdir), "{:?}", img.rw_mounts);
        assert!(img.rw_mounts.contains(&"/private/tmp".to_string()));
    }
}
