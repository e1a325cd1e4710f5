//! The workspace project: replay its commits into a work tree and a real `.git`.

use crate::git::{self, CommitIn, RepoOpts};
use crate::materialize::ImageError;
use crate::render::{render, tpl};
use crate::spec::ProjectSpec;
use crate::template::Vars;
use crate::tree::{check_rel, Tree};
use planted_creds::Gen;
use std::collections::BTreeMap;

/// (name, e-mail) of the user and of the colleague who wrote the other commits.
pub(crate) struct Authors {
    pub me: (String, String),
    pub colleague: (String, String),
}

/// Commits are dated `days_ago` before `now`, in working hours, strictly increasing; each file's
/// mtime (and its index entry) is the time of the last commit that touched it.
#[allow(clippy::too_many_arguments)]
pub(crate) fn plant(
    t: &mut Tree,
    proj: &ProjectSpec,
    workspace: &str,
    who: &Authors,
    repo: &RepoOpts,
    vars: &Vars,
    content: &mut Gen,
    now: i64,
) -> Result<(), ImageError> {
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
            let bytes = render(f, vars, content, now, time, &f.path)?;
            tree.insert(f.path.clone(), (bytes, f.mode & 0o111 != 0));
            mtimes.insert(f.path.clone(), time);
        }
        for d in &c.delete {
            tree.remove(d);
            mtimes.remove(d);
        }
        let pulled = c.author == "colleague";
        let (author, email) = if pulled { &who.colleague } else { &who.me };
        commits.push(CommitIn {
            message: tpl("commit message", &c.message, vars)?,
            author: author.clone(),
            email: email.clone(),
            time,
            tree: tree.clone(),
            pulled,
        });
    }
    let remote = tpl("project.remote", &proj.remote, vars)?;
    let out = git::build(
        &commits,
        &RepoOpts {
            remote: &remote,
            mtimes: &mtimes,
            ..*repo
        },
    );
    for (rel, (bytes, exec)) in &tree {
        let m = mtimes.get(rel).copied().unwrap_or(now);
        let mode = if *exec { 0o755 } else { 0o644 };
        t.file(&format!("{workspace}/{rel}"), bytes.clone(), mode, m)?;
    }
    let git_mtime = last_time.max(now - 86400);
    for d in &out.dirs {
        t.dir(&format!("{workspace}/.git/{d}"), 0o755)?;
    }
    for (rel, bytes) in out.files {
        // Loose objects are read-only, as git writes them.
        let mode = if rel.starts_with("objects/") {
            0o444
        } else {
            0o644
        };
        t.file(&format!("{workspace}/.git/{rel}"), bytes, mode, git_mtime)?;
    }
    Ok(())
}
