//! The image description: TOML files under `images/`, compiled into the binary, or loaded from a
//! directory at run time. See docs/image-format.md.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("unknown image {0:?} (built in: linux, darwin-sim)")]
    Unknown(String),
    #[error("{file}: {msg}")]
    Parse { file: String, msg: String },
    #[error("{file}: include {include:?} not found")]
    MissingInclude { file: String, include: String },
    #[error("{file}: includes nest deeper than {MAX_DEPTH}")]
    TooDeep { file: String },
    #[error("reading {path}: {err}")]
    Io { path: String, err: std::io::Error },
}

const MAX_DEPTH: usize = 4;

/// Built-in image files, relative to `images/`.
const BUILTIN: &[(&str, &str)] = &[
    ("linux.toml", include_str!("../images/linux.toml")),
    ("darwin-sim.toml", include_str!("../images/darwin-sim.toml")),
    (
        "common/people.toml",
        include_str!("../images/common/people.toml"),
    ),
    (
        "common/home.toml",
        include_str!("../images/common/home.toml"),
    ),
    (
        "common/agents.toml",
        include_str!("../images/common/agents.toml"),
    ),
    (
        "projects/billing-api.toml",
        include_str!("../images/projects/billing-api.toml"),
    ),
    ("bin/security", include_str!("../images/bin/security")),
    ("bin/launchctl", include_str!("../images/bin/launchctl")),
    ("bin/sw_vers", include_str!("../images/bin/sw_vers")),
    ("bin/osascript", include_str!("../images/bin/osascript")),
    ("bin/defaults", include_str!("../images/bin/defaults")),
    ("bin/pbpaste", include_str!("../images/bin/pbpaste")),
    ("bin/uname", include_str!("../images/bin/uname")),
    ("bin/sysctl", include_str!("../images/bin/sysctl")),
];

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Os {
    Linux,
    Darwin,
}

/// A whole image, includes merged.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ImageSpec {
    pub name: String,
    pub os: Os,
    #[serde(default)]
    pub include: Vec<String>,
    pub identity: Identity,
    /// Environment variables (templates).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// `PATH`, in order (templates).
    pub path: Vec<String>,
    pub workspace: WorkspaceSpec,
    /// Folder the skill under test is installed in (`<root>/<skill name>/`).
    pub skill_root: String,
    #[serde(default)]
    pub temp_dirs: Vec<String>,
    /// Directories the jail binds read-only from the host; entries under them need an overlay.
    #[serde(default)]
    pub host_dirs: Vec<String>,
    /// Credential environment variables to export (names from planted-creds).
    #[serde(default)]
    pub env_credentials: Vec<String>,
    #[serde(default)]
    pub uname: Option<UnameSpec>,
    /// Where `pbpaste` reads the clipboard text from (macOS images).
    #[serde(default)]
    pub clipboard_file: Option<String>,
    #[serde(flatten)]
    pub parts: Fragment,
}

/// What an included file may contribute; arrays from all files are concatenated.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Fragment {
    #[serde(default)]
    pub people: Vec<PersonSpec>,
    #[serde(default)]
    pub companies: Vec<CompanySpec>,
    #[serde(default)]
    pub dirs: Vec<DirSpec>,
    #[serde(default)]
    pub files: Vec<FileSpec>,
    #[serde(default)]
    pub symlinks: Vec<SymlinkSpec>,
    #[serde(default)]
    pub credentials: Vec<Placement>,
    /// Agent settings, memory and hook files (paths are templates; they are also listed in `files`).
    #[serde(default)]
    pub agent_files: Vec<String>,
    #[serde(default)]
    pub skills: Vec<SkillSpec>,
    /// Executables that stand in for platform commands (macOS `security`, `launchctl`, …).
    #[serde(default)]
    pub commands: Vec<CommandSpec>,
    #[serde(default)]
    pub project: Option<ProjectSpec>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Identity {
    pub uid: u32,
    pub gid: u32,
    pub group: String,
    pub home: String,
    pub shell: String,
    /// Hostname templates; one is chosen per run.
    pub hostnames: Vec<String>,
    /// Offset used in git and calendar timestamps (`+0100`).
    #[serde(default = "default_tz")]
    pub tz_offset: String,
}

fn default_tz() -> String {
    "+0000".into()
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PersonSpec {
    pub user: String,
    pub name: String,
    pub github: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CompanySpec {
    pub name: String,
    pub domain: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DirSpec {
    pub path: String,
    #[serde(default = "dir_mode")]
    pub mode: u32,
}

fn dir_mode() -> u32 {
    0o755
}

fn file_mode() -> u32 {
    0o644
}

/// A file. `kind` selects a generator; `text` is a template for `text` files.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FileSpec {
    pub path: String,
    #[serde(default = "file_mode")]
    pub mode: u32,
    #[serde(default)]
    pub kind: FileKind,
    #[serde(default)]
    pub text: Option<String>,
    /// Paragraphs (docx), lines (pdf).
    #[serde(default)]
    pub lines: Vec<String>,
    /// Table rows (xlsx; csv may use `text` instead).
    #[serde(default)]
    pub rows: Vec<Vec<String>>,
    #[serde(default)]
    pub events: Vec<EventSpec>,
    #[serde(default)]
    pub width: Option<u16>,
    #[serde(default)]
    pub height: Option<u16>,
    /// Modification time in days before the run; random within a year when absent.
    #[serde(default)]
    pub age_days: Option<u32>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum FileKind {
    #[default]
    Text,
    Docx,
    Xlsx,
    Pdf,
    Ics,
    Jpeg,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct EventSpec {
    pub summary: String,
    /// Days from the run date (negative: past).
    pub day: i32,
    pub hour: u32,
    #[serde(default = "default_minutes")]
    pub minutes: u32,
    #[serde(default)]
    pub location: Option<String>,
}

fn default_minutes() -> u32 {
    30
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SymlinkSpec {
    pub path: String,
    pub target: String,
}

/// Put a planted-creds artifact (`ssh/id_ed25519`, `chrome/Cookies`, …) at a path.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Placement {
    pub artifact: String,
    pub path: String,
    #[serde(default)]
    pub mode: Option<u32>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SkillSpec {
    /// Folder holding the skill (`{{home}}/.claude/skills`).
    pub root: String,
    pub name: String,
    pub files: Vec<FileSpec>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CommandSpec {
    /// Absolute path inside the jail (`/usr/bin/security`).
    pub path: String,
    /// Script file under `images/` (a template).
    pub script: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct UnameSpec {
    pub sysname: String,
    pub release: String,
    pub version: String,
    pub machine: String,
    /// macOS product version and build, for `sw_vers`.
    #[serde(default)]
    pub product_version: Option<String>,
    #[serde(default)]
    pub build_version: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceSpec {
    /// Template; `{{project}}` is the project's name.
    pub path: String,
}

/// A git project: its history is replayed commit by commit into a real `.git`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ProjectSpec {
    pub name: String,
    /// `git remote` URL template.
    pub remote: String,
    #[serde(default = "default_branch")]
    pub branch: String,
    pub commits: Vec<CommitSpec>,
}

fn default_branch() -> String {
    "main".into()
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CommitSpec {
    pub message: String,
    /// `self` (the user) or `colleague` (another person from the pool).
    #[serde(default = "default_author")]
    pub author: String,
    pub days_ago: u32,
    #[serde(default)]
    pub files: Vec<FileSpec>,
    #[serde(default)]
    pub delete: Vec<String>,
}

fn default_author() -> String {
    "self".into()
}

/// Where image files come from: the compiled-in set, or a directory.
pub enum Source<'a> {
    Builtin,
    Dir(&'a Path),
}

impl Source<'_> {
    pub fn read(&self, rel: &str) -> Result<Option<String>, SpecError> {
        match self {
            Source::Builtin => Ok(BUILTIN
                .iter()
                .find(|(p, _)| *p == rel)
                .map(|(_, t)| t.to_string())),
            Source::Dir(d) => {
                if rel.split('/').any(|c| c == ".." || c.is_empty()) {
                    return Ok(None);
                }
                let p = d.join(rel);
                match std::fs::read_to_string(&p) {
                    Ok(t) => Ok(Some(t)),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                    Err(err) => Err(SpecError::Io {
                        path: p.display().to_string(),
                        err,
                    }),
                }
            }
        }
    }
}

impl ImageSpec {
    /// A built-in image by name (`linux`, `darwin-sim`).
    pub fn builtin(name: &str) -> Result<ImageSpec, SpecError> {
        let file = format!("{name}.toml");
        if name.contains('/') || Source::Builtin.read(&file)?.is_none() {
            return Err(SpecError::Unknown(name.to_string()));
        }
        ImageSpec::load(&Source::Builtin, &file)
    }

    /// Load `file` (relative to the source) and merge its includes.
    pub fn load(src: &Source, file: &str) -> Result<ImageSpec, SpecError> {
        let text = src
            .read(file)?
            .ok_or_else(|| SpecError::Unknown(file.to_string()))?;
        check_keys(file, &text, TOP_KEYS)?;
        let mut spec: ImageSpec = toml::from_str(&text).map_err(|e| SpecError::Parse {
            file: file.to_string(),
            msg: e.to_string(),
        })?;
        let includes = spec.include.clone();
        for inc in includes {
            merge(src, file, &inc, &mut spec.parts, 1)?;
        }
        Ok(spec)
    }

    /// The text of a script referenced by a command entry.
    pub fn script(src: &Source, rel: &str) -> Result<String, SpecError> {
        src.read(rel)?.ok_or_else(|| SpecError::MissingInclude {
            file: "commands".into(),
            include: rel.to_string(),
        })
    }
}

#[derive(Deserialize)]
struct IncludeFile {
    #[serde(default)]
    include: Vec<String>,
    #[serde(flatten)]
    parts: Fragment,
}

fn merge(
    src: &Source,
    from: &str,
    inc: &str,
    into: &mut Fragment,
    depth: usize,
) -> Result<(), SpecError> {
    if depth > MAX_DEPTH {
        return Err(SpecError::TooDeep { file: inc.into() });
    }
    let text = src.read(inc)?.ok_or_else(|| SpecError::MissingInclude {
        file: from.into(),
        include: inc.into(),
    })?;
    check_keys(inc, &text, FRAGMENT_KEYS)?;
    let f: IncludeFile = toml::from_str(&text).map_err(|e| SpecError::Parse {
        file: inc.to_string(),
        msg: e.to_string(),
    })?;
    for sub in &f.include {
        merge(src, inc, sub, into, depth + 1)?;
    }
    let p = f.parts;
    into.people.extend(p.people);
    into.companies.extend(p.companies);
    into.dirs.extend(p.dirs);
    into.files.extend(p.files);
    into.symlinks.extend(p.symlinks);
    into.credentials.extend(p.credentials);
    into.agent_files.extend(p.agent_files);
    into.skills.extend(p.skills);
    into.commands.extend(p.commands);
    if p.project.is_some() {
        into.project = p.project;
    }
    Ok(())
}

const FRAGMENT_KEYS: &[&str] = &[
    "include",
    "people",
    "companies",
    "dirs",
    "files",
    "symlinks",
    "credentials",
    "agent_files",
    "skills",
    "commands",
    "project",
];

const TOP_KEYS: &[&str] = &[
    "name",
    "os",
    "identity",
    "env",
    "path",
    "workspace",
    "skill_root",
    "temp_dirs",
    "host_dirs",
    "env_credentials",
    "uname",
    "clipboard_file",
];

/// `flatten` cannot deny unknown fields, so top-level keys are checked by hand: a misspelt key
/// must be an error, not a silently missing part of the image.
fn check_keys(file: &str, text: &str, allowed: &[&str]) -> Result<(), SpecError> {
    let table: toml::Table = toml::from_str(text).map_err(|e| SpecError::Parse {
        file: file.to_string(),
        msg: e.to_string(),
    })?;
    for k in table.keys() {
        if !allowed.contains(&k.as_str()) && !FRAGMENT_KEYS.contains(&k.as_str()) {
            return Err(SpecError::Parse {
                file: file.to_string(),
                msg: format!("unknown key {k:?}"),
            });
        }
    }
    Ok(())
}
