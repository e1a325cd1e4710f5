//! Turning an image description, a skill and a seed into the entries the jail writes.

use crate::documents::{self, DocError};
use crate::git::{self, CommitIn, RepoOpts};
use crate::spec::{FileKind, FileSpec, ImageSpec, Os, PersonSpec, Source, SpecError};
use crate::system::{self, Account};
use crate::template::{expand, TemplateError, Vars};
use crate::{CredentialEnv, CredentialFile, Entry, ImageContext, Materialized, Uname};
use planted_creds::gen::{Gen, LOWER_ALNUM};
use planted_creds::{
    find_tell, generate, Flavor, Location, Persona, PlantError, Registry, RegistryError, Seed,
};
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error(transparent)]
    Spec(#[from] SpecError),
    #[error("{what}: {err}")]
    Template { what: String, err: TemplateError },
    #[error("credentials: {0}")]
    Plant(#[from] PlantError),
    #[error("registry: {0}")]
    Registry(#[from] RegistryError),
    #[error("image places unknown credential artifact {0:?}")]
    UnknownArtifact(String),
    #[error("image exports unknown credential variable {0:?}")]
    UnknownEnv(String),
    #[error("image {0} has no people or no companies to draw the user from")]
    NoIdentity(String),
    #[error("invalid path {0:?}: must be absolute, without '.', '..' or empty parts")]
    BadPath(String),
    #[error("skill file {0:?}: must be a relative path without '.', '..' or empty parts")]
    BadSkillPath(String),
    #[error("invalid skill name {0:?}")]
    BadSkillName(String),
    #[error("{0} is placed twice")]
    Conflict(String),
    #[error("document {path}: {err}")]
    Document { path: String, err: DocError },
    #[error("generated {path} contains the word {word:?}")]
    Tell { path: String, word: &'static str },
    #[error("system clock before 1970")]
    Clock,
}

fn tpl(what: &str, text: &str, vars: &Vars) -> Result<String, ImageError> {
    expand(text, vars).map_err(|err| ImageError::Template {
        what: what.to_string(),
        err,
    })
}

/// Materialise for the current day: every date is derived from the start of today (UTC), so the same
/// seed gives the same result all day.
pub fn materialize(
    image: &ImageSpec,
    skill_name: &str,
    skill_files: &[(String, Vec<u8>, u32)],
    seed: &Seed,
) -> Result<Materialized, ImageError> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|_| ImageError::Clock)?
        .as_secs() as i64;
    materialize_at(
        image,
        skill_name,
        skill_files,
        seed,
        now - now.rem_euclid(86400),
    )
}

fn check_path(p: &str) -> Result<(), ImageError> {
    let ok = p.starts_with('/')
        && p.len() > 1
        && !p.ends_with('/')
        && !p.contains('\0')
        && p[1..]
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != "..");
    if ok {
        Ok(())
    } else {
        Err(ImageError::BadPath(p.to_string()))
    }
}

fn check_rel(p: &str) -> bool {
    !p.is_empty()
        && !p.starts_with('/')
        && !p.contains('\0')
        && p.split('/').all(|c| !c.is_empty() && c != "." && c != "..")
}

struct Tree {
    entries: BTreeMap<String, Entry>,
    g: Gen,
    now: i64,
}

impl Tree {
    fn parent_dirs(&mut self, path: &str) {
        let mut cur = String::new();
        let parts: Vec<&str> = path[1..].split('/').collect();
        for c in &parts[..parts.len() - 1] {
            cur.push('/');
            cur.push_str(c);
            if !self.entries.contains_key(&cur) {
                let mtime = self.now - self.g.range(0, 60 * 86400);
                self.entries.insert(
                    cur.clone(),
                    Entry::Dir {
                        path: cur.clone(),
                        mode: 0o755,
                        mtime,
                    },
                );
            }
        }
    }

    fn dir(&mut self, path: &str, mode: u32) -> Result<(), ImageError> {
        check_path(path)?;
        self.parent_dirs(path);
        let mtime = self.now - self.g.range(0, 60 * 86400);
        match self.entries.get_mut(path) {
            Some(Entry::Dir { mode: m, .. }) => *m = mode,
            Some(_) => return Err(ImageError::Conflict(path.into())),
            None => {
                self.entries.insert(
                    path.into(),
                    Entry::Dir {
                        path: path.into(),
                        mode,
                        mtime,
                    },
                );
            }
        }
        Ok(())
    }

    fn file(
        &mut self,
        path: &str,
        bytes: Vec<u8>,
        mode: u32,
        mtime: i64,
    ) -> Result<(), ImageError> {
        check_path(path)?;
        if self.entries.contains_key(path) {
            return Err(ImageError::Conflict(path.into()));
        }
        self.parent_dirs(path);
        self.entries.insert(
            path.into(),
            Entry::File {
                path: path.into(),
                bytes,
                mode,
                mtime,
            },
        );
        Ok(())
    }

    fn symlink(&mut self, path: &str, target: &str) -> Result<(), ImageError> {
        check_path(path)?;
        if self.entries.contains_key(path) {
            return Err(ImageError::Conflict(path.into()));
        }
        self.parent_dirs(path);
        self.entries.insert(
            path.into(),
            Entry::Symlink {
                path: path.into(),
                target: target.into(),
            },
        );
        Ok(())
    }

    fn age(&mut self, days: Option<u32>) -> i64 {
        match days {
            Some(d) => self.now - i64::from(d) * 86400 - self.g.range(0, 20_000),
            None => self.now - self.g.range(86400, 365 * 86400),
        }
    }
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

fn email_of(p: &PersonSpec, domain: &str) -> String {
    let parts: Vec<String> = p
        .name
        .split_whitespace()
        .map(|w| {
            w.chars()
                .filter(|c| c.is_ascii_alphanumeric())
                .collect::<String>()
                .to_ascii_lowercase()
        })
        .filter(|w| !w.is_empty())
        .collect();
    format!("{}@{domain}", parts.join("."))
}

/// Render one file description (text or generated document) with the run's variables.
fn render(
    f: &FileSpec,
    vars: &Vars,
    g: &mut Gen,
    now: i64,
    mtime: i64,
    path: &str,
) -> Result<Vec<u8>, ImageError> {
    let doc = |err| ImageError::Document {
        path: path.to_string(),
        err,
    };
    let lines = f
        .lines
        .iter()
        .map(|l| tpl(path, l, vars))
        .collect::<Result<Vec<_>, _>>()?;
    let author = vars.get("full_name").cloned().unwrap_or_default();
    Ok(match f.kind {
        FileKind::Text => tpl(path, f.text.as_deref().unwrap_or(""), vars)?.into_bytes(),
        FileKind::Docx => documents::docx(&lines, &author, mtime).map_err(doc)?,
        FileKind::Xlsx => {
            let rows = f
                .rows
                .iter()
                .map(|r| {
                    r.iter()
                        .map(|c| tpl(path, c, vars))
                        .collect::<Result<Vec<_>, _>>()
                })
                .collect::<Result<Vec<_>, _>>()?;
            documents::xlsx(&rows, &author, mtime).map_err(doc)?
        }
        FileKind::Pdf => documents::pdf(&lines, &author, mtime),
        FileKind::Ics => {
            let uids: Vec<String> = f
                .events
                .iter()
                .map(|_| g.uuid().to_ascii_uppercase())
                .collect();
            let prodid = vars.get("ics_prodid").cloned().unwrap_or_default();
            documents::ics(&f.events, &uids, now, &prodid).into_bytes()
        }
        FileKind::Jpeg => documents::jpeg(f.width.unwrap_or(640), f.height.unwrap_or(480)),
    })
}

/// How many derived seeds to try when generated bytes happen to spell a tell word.
const ATTEMPTS: usize = 8;

/// Materialise with every date relative to `now` (Unix seconds).
///
/// Random key material, ciphertext and compressed data occasionally spell a word from
/// [`planted_creds::TELL_WORDS`] by chance (well under one run in a hundred). Such a run is redrawn
/// from `seed.derive("again")`, and the seed actually used is the one recorded in the result
/// (`seed`, `registry.seed`, `context.creds_seed`), so materialising that seed reproduces it.
pub fn materialize_at(
    image: &ImageSpec,
    skill_name: &str,
    skill_files: &[(String, Vec<u8>, u32)],
    seed: &Seed,
    now: i64,
) -> Result<Materialized, ImageError> {
    let mut seed = seed.clone();
    let mut last = None;
    for _ in 0..ATTEMPTS {
        match attempt(image, skill_name, skill_files, &seed, now) {
            Err(e @ (ImageError::Tell { .. } | ImageError::Plant(PlantError::Tell { .. }))) => {
                tracing::debug!(error = %e, "redrawing the image from a derived seed");
                last = Some(e);
                seed = seed.derive("again");
            }
            other => return other,
        }
    }
    Err(last.unwrap_or(ImageError::Clock))
}

fn attempt(
    image: &ImageSpec,
    skill_name: &str,
    skill_files: &[(String, Vec<u8>, u32)],
    seed: &Seed,
    now: i64,
) -> Result<Materialized, ImageError> {
    if skill_name.is_empty()
        || skill_name.len() > 128
        || !skill_name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        || skill_name.starts_with('.')
    {
        return Err(ImageError::BadSkillName(skill_name.to_string()));
    }
    for (p, _, _) in skill_files {
        if !check_rel(p) {
            return Err(ImageError::BadSkillPath(p.clone()));
        }
    }
    let parts = &image.parts;
    let spec_id = &image.identity;
    let mut g = Gen::new(seed.rng("persona"));
    if parts.people.is_empty() || parts.companies.is_empty() || spec_id.hostnames.is_empty() {
        return Err(ImageError::NoIdentity(image.name.clone()));
    }
    let person = g.pick(&parts.people).clone();
    let others: Vec<&PersonSpec> = parts
        .people
        .iter()
        .filter(|p| p.user != person.user)
        .collect();
    let colleague = if others.is_empty() {
        person.clone()
    } else {
        (*g.pick(&others)).clone()
    };
    let company = g.pick(&parts.companies).clone();
    let project = parts
        .project
        .as_ref()
        .map(|p| p.name.clone())
        .unwrap_or_else(|| "project".into());
    let company_slug = company
        .name
        .to_ascii_lowercase()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join("-");

    let mut vars = Vars::new();
    let set = |vars: &mut Vars, k: &str, v: String| {
        vars.insert(k.to_string(), v);
    };
    set(&mut vars, "user", person.user.clone());
    set(&mut vars, "User", capitalise(&person.user));
    set(&mut vars, "full_name", person.name.clone());
    set(&mut vars, "github_user", person.github.clone());
    set(&mut vars, "company", company.name.clone());
    set(&mut vars, "company_domain", company.domain.clone());
    set(&mut vars, "company_slug", company_slug);
    set(&mut vars, "project", project.clone());
    set(&mut vars, "uid", spec_id.uid.to_string());
    set(&mut vars, "gid", spec_id.gid.to_string());
    set(&mut vars, "shell", spec_id.shell.clone());
    let email = email_of(&person, &company.domain);
    set(&mut vars, "email", email.clone());
    let home = tpl("identity.home", &spec_id.home, &vars)?;
    set(&mut vars, "home", home.clone());
    let hostname = tpl(
        "identity.hostnames",
        g.pick(&spec_id.hostnames).as_str(),
        &vars,
    )?;
    set(&mut vars, "hostname", hostname.clone());
    let group = tpl("identity.group", &spec_id.group, &vars)?;
    let workspace = tpl("workspace.path", &image.workspace.path, &vars)?;
    set(&mut vars, "workspace", workspace.clone());
    let firefox_profile = format!("{}.default-release", g.chars(LOWER_ALNUM, 8));
    set(&mut vars, "firefox_profile", firefox_profile.clone());
    let tmp = format!(
        "/var/folders/{}/{}0000gn/T",
        g.chars(b"abcdefghijklmnopqrstuvwxyz0123456789_", 2),
        g.chars(b"abcdefghijklmnopqrstuvwxyz0123456789_", 22)
    );
    set(&mut vars, "darwin_tmpdir", tmp);
    set(&mut vars, "launchd_sock", g.alnum(10));
    set(&mut vars, "pasteboard_item", g.uuid().to_ascii_uppercase());
    set(
        &mut vars,
        "keychain_file",
        format!("{home}/Library/Keychains/login.keychain-db"),
    );
    set(
        &mut vars,
        "boot_time",
        (now - g.range(86400, 9 * 86400)).to_string(),
    );
    set(
        &mut vars,
        "ics_prodid",
        match image.os {
            Os::Darwin => "-//Apple Inc.//macOS 15.5//EN".into(),
            Os::Linux => "-//Google Inc//Google Calendar 70.9054//EN".into(),
        },
    );
    let uname = match &image.uname {
        Some(u) => {
            set(&mut vars, "uname_release", u.release.clone());
            set(&mut vars, "uname_version", u.version.clone());
            set(&mut vars, "uname_machine", u.machine.clone());
            set(
                &mut vars,
                "product_version",
                u.product_version.clone().unwrap_or_default(),
            );
            set(
                &mut vars,
                "build_version",
                u.build_version.clone().unwrap_or_default(),
            );
            Some(Uname {
                sysname: u.sysname.clone(),
                nodename: hostname.clone(),
                release: u.release.clone(),
                version: u.version.clone(),
                machine: u.machine.clone(),
            })
        }
        None => None,
    };
    let clipboard_file = match &image.clipboard_file {
        Some(c) => Some(tpl("clipboard_file", c, &vars)?),
        None => None,
    };
    if let Some(c) = &clipboard_file {
        set(&mut vars, "clipboard_file", c.clone());
    }
    let skill_root = tpl("skill_root", &image.skill_root, &vars)?;
    let skill_dir = format!("{skill_root}/{skill_name}");
    set(&mut vars, "skill_name", skill_name.to_string());
    set(&mut vars, "skill_dir", skill_dir.clone());

    let persona = Persona {
        user: person.user.clone(),
        full_name: person.name.clone(),
        email: email.clone(),
        github_user: person.github.clone(),
        hostname: hostname.clone(),
        home: home.clone(),
        workspace: workspace.clone(),
        project: project.clone(),
        company: company.name.clone(),
        company_domain: company.domain.clone(),
        flavor: match image.os {
            Os::Linux => Flavor::Linux,
            Os::Darwin => Flavor::Darwin,
        },
        firefox_profile,
    };
    let planted = generate(seed, &persona, now)?;
    let mut registry = planted.registry.clone();

    let mut t = Tree {
        entries: BTreeMap::new(),
        g: Gen::new(seed.rng("mtimes")),
        now,
    };
    let mut content = Gen::new(seed.rng("documents"));
    t.dir(&home, if image.os == Os::Linux { 0o750 } else { 0o755 })?;
    t.dir(&workspace, 0o755)?;

    let account = Account {
        user: &person.user,
        full_name: &person.name,
        uid: spec_id.uid,
        gid: spec_id.gid,
        group: &group,
        home: &home,
        shell: &spec_id.shell,
        hostname: &hostname,
    };
    for (path, text) in system::etc_files(image.os, &account) {
        let m = t.age(Some(30));
        t.file(&path, text.into_bytes(), 0o644, m)?;
    }
    for d in &parts.dirs {
        let p = tpl("dirs", &d.path, &vars)?;
        t.dir(&p, d.mode)?;
    }
    for f in &parts.files {
        let p = tpl("files", &f.path, &vars)?;
        let m = t.age(f.age_days);
        let bytes = render(f, &vars, &mut content, now, m, &p)?;
        t.file(&p, bytes, f.mode, m)?;
    }
    for s in &parts.symlinks {
        let p = tpl("symlinks", &s.path, &vars)?;
        let target = tpl("symlinks", &s.target, &vars)?;
        t.symlink(&p, &target)?;
    }

    // Credentials.
    let mut credential_files = Vec::new();
    for pl in &parts.credentials {
        let f = planted
            .files
            .get(&pl.artifact)
            .ok_or_else(|| ImageError::UnknownArtifact(pl.artifact.clone()))?;
        let p = tpl("credentials", &pl.path, &vars)?;
        let m = now - t.g.range(5 * 86400, 300 * 86400);
        t.file(&p, f.bytes.clone(), pl.mode.unwrap_or(f.mode), m)?;
        for c in &f.credentials {
            registry.add_location(c, Location::File { path: p.clone() })?;
            credential_files.push((p.clone(), c.clone()));
        }
    }

    // Workspace project with history.
    if let Some(proj) = &parts.project {
        let mut tree: BTreeMap<String, (Vec<u8>, bool)> = BTreeMap::new();
        let mut mtimes: BTreeMap<String, i64> = BTreeMap::new();
        let mut commits = Vec::new();
        let day0 = now - now.rem_euclid(86400);
        let mut last_time = i64::MIN;
        for c in &proj.commits {
            let mut time = day0 - i64::from(c.days_ago) * 86400 + t.g.range(8 * 3600, 18 * 3600);
            time = time.max(last_time + 60).min(now - 600);
            last_time = time;
            for f in &c.files {
                if !check_rel(&f.path) {
                    return Err(ImageError::BadSkillPath(f.path.clone()));
                }
                let bytes = render(f, &vars, &mut content, now, time, &f.path)?;
                tree.insert(f.path.clone(), (bytes, f.mode & 0o111 != 0));
                mtimes.insert(f.path.clone(), time);
            }
            for d in &c.delete {
                tree.remove(d);
                mtimes.remove(d);
            }
            let (author, mail) = if c.author == "colleague" {
                (
                    colleague.name.clone(),
                    email_of(&colleague, &company.domain),
                )
            } else {
                (person.name.clone(), email.clone())
            };
            commits.push(CommitIn {
                message: tpl("commit message", &c.message, &vars)?,
                author,
                email: mail,
                time,
                tree: tree.clone(),
                pulled: c.author == "colleague",
            });
        }
        let remote = tpl("project.remote", &proj.remote, &vars)?;
        let repo = git::build(
            &commits,
            &RepoOpts {
                branch: &proj.branch,
                remote: &remote,
                tz: &spec_id.tz_offset,
                user: &person.name,
                email: &email,
                uid: spec_id.uid,
                gid: spec_id.gid,
                darwin: image.os == Os::Darwin,
                mtimes: &mtimes,
            },
        );
        for (rel, (bytes, exec)) in &tree {
            let m = mtimes.get(rel).copied().unwrap_or(now);
            t.file(
                &format!("{workspace}/{rel}"),
                bytes.clone(),
                if *exec { 0o755 } else { 0o644 },
                m,
            )?;
        }
        let gm = last_time.max(now - 86400);
        for d in &repo.dirs {
            t.dir(&format!("{workspace}/.git/{d}"), 0o755)?;
        }
        for (rel, bytes) in repo.files {
            let mode = if rel.starts_with("objects/") {
                0o444
            } else {
                0o644
            };
            t.file(&format!("{workspace}/.git/{rel}"), bytes, mode, gm)?;
        }
    }

    // Skills: siblings, then the one under test.
    let mut other_skill_dirs = BTreeSet::new();
    for s in &parts.skills {
        let root = tpl("skills", &s.root, &vars)?;
        let dir = format!("{root}/{}", s.name);
        if dir == skill_dir {
            continue;
        }
        for f in &s.files {
            if !check_rel(&f.path) {
                return Err(ImageError::BadSkillPath(f.path.clone()));
            }
            let m = t.age(f.age_days);
            let bytes = render(f, &vars, &mut content, now, m, &f.path)?;
            t.file(&format!("{dir}/{}", f.path), bytes, f.mode, m)?;
        }
        other_skill_dirs.insert(dir);
        other_skill_dirs.insert(root);
    }
    other_skill_dirs.remove(&skill_root);
    t.dir(&skill_dir, 0o755)?;
    let installed = now - t.g.range(3600, 3 * 86400);
    for (rel, bytes, mode) in skill_files {
        t.file(
            &format!("{skill_dir}/{rel}"),
            bytes.clone(),
            mode & 0o7777,
            installed,
        )?;
    }

    // Platform commands.
    let mut commands = Vec::new();
    for c in &parts.commands {
        let text = ImageSpec::script(&Source::Builtin, &c.script)?;
        let body = tpl(&c.script, &text, &vars)?;
        let p = tpl("commands", &c.path, &vars)?;
        t.file(&p, body.into_bytes(), 0o755, now - 40 * 86400)?;
        commands.push(p);
    }

    // Clipboard, keychain and password prompt (macOS).
    if let Some(cf) = &clipboard_file {
        t.file(
            cf,
            planted.clipboard.value.clone().into_bytes(),
            0o600,
            now - 1800,
        )?;
        registry.add_location(&planted.clipboard.credential, Location::Clipboard)?;
        registry.add_location(
            &planted.clipboard.credential,
            Location::File { path: cf.clone() },
        )?;
        credential_files.push((cf.clone(), planted.clipboard.credential.clone()));
    }
    if image.os == Os::Darwin {
        for k in &planted.keychain {
            registry.add_location(
                &k.credential,
                Location::Keychain {
                    class: k.class.tag().into(),
                    service: k.service.clone(),
                    account: k.account.clone(),
                },
            )?;
        }
        if commands.iter().any(|c| c.ends_with("/osascript")) {
            registry.add_location(&planted.login_password.credential, Location::Prompt)?;
        }
    }

    // Environment.
    let path_dirs = image
        .path
        .iter()
        .map(|p| tpl("path", p, &vars))
        .collect::<Result<Vec<_>, _>>()?;
    let mut env: Vec<(String, String)> = Vec::new();
    for (k, v) in &image.env {
        env.push((k.clone(), tpl(&format!("env {k}"), v, &vars)?));
    }
    env.push(("PATH".into(), path_dirs.join(":")));
    let mut credential_env = Vec::new();
    for name in &image.env_credentials {
        let e = planted
            .env_var(name)
            .ok_or_else(|| ImageError::UnknownEnv(name.clone()))?;
        env.push((name.clone(), e.value.clone()));
        registry.add_location(&e.credential, Location::Env { name: name.clone() })?;
        credential_env.push((name.clone(), e.credential.clone()));
    }
    env.retain(|(_, v)| !v.is_empty());
    env.sort();

    registry.retain_placed();
    let temp_dirs = image
        .temp_dirs
        .iter()
        .map(|p| tpl("temp_dirs", p, &vars))
        .collect::<Result<Vec<_>, _>>()?;
    for d in &temp_dirs {
        if !t.entries.contains_key(d) {
            t.dir(d, 0o1777)?;
        }
    }
    let agent_files = parts
        .agent_files
        .iter()
        .map(|p| tpl("agent_files", p, &vars))
        .collect::<Result<Vec<_>, _>>()?;
    let host_dirs = image
        .host_dirs
        .iter()
        .map(|p| tpl("host_dirs", p, &vars))
        .collect::<Result<Vec<_>, _>>()?;

    let entries: Vec<Entry> = t.entries.into_values().collect();
    scan_for_tells(
        &entries,
        &env,
        &skill_dir,
        &[&hostname, &person.user, &group],
    )?;
    let system_overrides = entries
        .iter()
        .map(Entry::path)
        .filter(|p| host_dirs.iter().any(|h| under(p, h)))
        .map(String::from)
        .collect();

    let hosts_of = |reg: &Registry, id: &str| {
        reg.credential(id)
            .map(|c| c.service_hosts.clone())
            .unwrap_or_default()
    };
    let context = ImageContext {
        home: home.clone(),
        workspace: workspace.clone(),
        skill_dir: skill_dir.clone(),
        other_skill_dirs: other_skill_dirs.into_iter().collect(),
        agent_files,
        temp_dirs,
        path_dirs: path_dirs.clone(),
        credential_files: credential_files
            .into_iter()
            .map(|(path, credential)| CredentialFile {
                service_hosts: hosts_of(&registry, &credential),
                path,
                credential,
            })
            .collect(),
        credential_env: credential_env
            .into_iter()
            .map(|(name, credential)| CredentialEnv {
                service_hosts: hosts_of(&registry, &credential),
                name,
                credential,
            })
            .collect(),
        creds_seed: Some(seed.to_string()),
    };
    Ok(Materialized {
        image: image.name.clone(),
        os: image.os,
        user: person.user,
        full_name: person.name,
        uid: spec_id.uid,
        gid: spec_id.gid,
        group,
        home,
        workspace,
        skill_dir,
        hostname,
        shell: spec_id.shell.clone(),
        env,
        entries,
        path_dirs,
        uname,
        registry,
        context,
        commands,
        system_overrides,
        host_dirs,
        seed: seed.to_string(),
        now,
    })
}

fn under(path: &str, dir: &str) -> bool {
    path == dir || path.strip_prefix(dir).is_some_and(|r| r.starts_with('/'))
}

/// Nothing we generate may carry a word that tells a skill it is watched. The skill's own files
/// are its business and are not checked.
fn scan_for_tells(
    entries: &[Entry],
    env: &[(String, String)],
    skill_dir: &str,
    names: &[&str],
) -> Result<(), ImageError> {
    let tell = |path: &str, bytes: &[u8]| match find_tell(bytes) {
        Some(word) => Err(ImageError::Tell {
            path: path.to_string(),
            word,
        }),
        None => Ok(()),
    };
    for e in entries {
        if under(e.path(), skill_dir) {
            continue;
        }
        tell(e.path(), e.path().as_bytes())?;
        match e {
            Entry::File { path, bytes, .. } => tell(path, bytes)?,
            Entry::Symlink { path, target } => tell(path, target.as_bytes())?,
            Entry::Dir { .. } => {}
        }
    }
    for (k, v) in env {
        tell(&format!("${k}"), k.as_bytes())?;
        tell(&format!("${k}"), v.as_bytes())?;
    }
    for n in names {
        tell("identity", n.as_bytes())?;
    }
    Ok(())
}
