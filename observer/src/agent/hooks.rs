//! Code that runs because of a manifest rather than an instruction: `package.json` lifecycle
//! scripts (what `npm install` runs), `setup.py` and `pyproject.toml` build hooks (what
//! `pip install .` runs). Claude Code hooks: [`super::claude_hooks`]; `make`: [`super::make`].

use super::scripts::PathIndex;
use super::{brief, Draft, PlanContext, Source, StepKind, MAX_COMMAND_BYTES};
use crate::bundle::SkillUnit;
use regex::Regex;
use serde_json::Value;
use std::sync::LazyLock;

/// npm's install-time lifecycle, in the order `npm install` runs it.
pub const NPM_LIFECYCLE: &[&str] = &[
    "preinstall",
    "install",
    "postinstall",
    "preprepare",
    "prepare",
    "postprepare",
];
/// At most this many `setup.py` commands (from `cmdclass`) per file.
const MAX_SETUP_COMMANDS: usize = 4;

pub(crate) fn vendored(path: &str) -> bool {
    path.split('/').any(|c| {
        matches!(
            c,
            "node_modules" | ".git" | ".venv" | "venv" | "site-packages" | "__pycache__"
        )
    })
}

pub(crate) fn dir_of(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(d, _)| d)
}

pub(crate) fn join(base: &str, rel: &str) -> String {
    if rel.is_empty() {
        base.to_string()
    } else {
        format!("{base}/{rel}")
    }
}

/// Bundled scripts a command run in `dir` (relative to the skill) names.
pub(crate) fn scripts_named(unit: &SkillUnit, dir: &str, cmd: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for m in PathIndex::scripts(unit).find(cmd, dir) {
        if !out.contains(&m.script) {
            out.push(m.script);
        }
    }
    out
}

/// `package.json`, `setup.py` and `pyproject.toml` hooks, in path order.
pub fn lifecycle(
    unit: &SkillUnit,
    ctx: &PlanContext,
    not_run: &mut Vec<(String, String)>,
) -> Vec<Draft> {
    let mut out = Vec::new();
    for (path, file) in &unit.files {
        if vendored(path) {
            continue;
        }
        let name = path.rsplit('/').next().unwrap_or(path);
        let dir = dir_of(path);
        let cwd = join(&ctx.skill_dir, dir);
        let Some(text) = file.text() else { continue };
        match name {
            "package.json" => out.extend(npm(unit, path, text, &cwd, ctx, not_run)),
            "setup.py" => out.extend(setup_py(unit, path, text, &cwd)),
            "pyproject.toml" => out.extend(pyproject(unit, path, text, &cwd, not_run)),
            _ => {}
        }
    }
    out
}

fn npm(
    unit: &SkillUnit,
    path: &str,
    text: &str,
    cwd: &str,
    ctx: &PlanContext,
    not_run: &mut Vec<(String, String)>,
) -> Vec<Draft> {
    let v: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            not_run.push((path.to_string(), format!("invalid JSON: {e}")));
            return Vec::new();
        }
    };
    let scripts = v.get("scripts").and_then(Value::as_object);
    let mut out = Vec::new();
    for ev in NPM_LIFECYCLE {
        let Some(cmd) = scripts.and_then(|s| s.get(*ev)).and_then(Value::as_str) else {
            continue;
        };
        if cmd.len() > MAX_COMMAND_BYTES {
            not_run.push((format!("{path} {ev}"), "script too large".into()));
            continue;
        }
        // npm runs lifecycle scripts with `sh -c` in the package folder, with its variables.
        let mut d = Draft::new(
            StepKind::LifecycleHook,
            format!("npm {ev} ({path}): {}", brief(cmd)),
            vec!["sh".into(), "-c".into(), cmd.to_string()],
            cwd,
            Source::file(path),
        );
        let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        d.env_extra = vec![
            ("npm_lifecycle_event".into(), ev.to_string()),
            ("npm_lifecycle_script".into(), cmd.to_string()),
            ("npm_package_name".into(), s("name")),
            ("npm_package_version".into(), s("version")),
            (
                "npm_package_json".into(),
                format!("{}/{path}", ctx.skill_dir),
            ),
            ("npm_command".into(), "install".into()),
            ("INIT_CWD".into(), cwd.to_string()),
        ];
        d.scripts = scripts_named(unit, dir_of(path), cmd);
        out.push(d);
    }
    out
}

fn setup_py(unit: &SkillUnit, path: &str, text: &str, cwd: &str) -> Vec<Draft> {
    // `--version` executes every module-level statement, as any `pip install` does first.
    let mut cmds = vec!["--version".to_string()];
    cmds.extend(cmdclass_keys(text).into_iter().take(MAX_SETUP_COMMANDS));
    cmds.dedup();
    cmds.into_iter()
        .map(|c| {
            let mut d = Draft::new(
                StepKind::LifecycleHook,
                format!("python3 {path} {c}"),
                vec!["python3".into(), "setup.py".into(), c],
                cwd,
                Source::file(path),
            );
            d.scripts = vec![path.to_string()]
                .into_iter()
                .filter(|p| unit.scripts.iter().any(|s| &s.path == p))
                .collect();
            d
        })
        .collect()
}

/// Commands a `setup.py` overrides: `cmdclass={"install": X}` or `cmdclass=dict(install=X)`.
fn cmdclass_keys(text: &str) -> Vec<String> {
    static DICT: LazyLock<Regex> = LazyLock::new(|| {
        crate::util::regex(r"(?s)cmdclass\s*=\s*\{(.{0,2000}?)\}").expect("valid")
    });
    static CALL: LazyLock<Regex> = LazyLock::new(|| {
        crate::util::regex(r"(?s)cmdclass\s*=\s*dict\((.{0,2000}?)\)").expect("valid")
    });
    static KEY: LazyLock<Regex> = LazyLock::new(|| {
        crate::util::regex(r#"['"]([A-Za-z_][A-Za-z0-9_]*)['"]\s*:"#).expect("valid")
    });
    static KW: LazyLock<Regex> =
        LazyLock::new(|| crate::util::regex(r"([A-Za-z_][A-Za-z0-9_]*)\s*=").expect("valid"));
    let mut out = Vec::new();
    for c in DICT.captures_iter(text) {
        out.extend(KEY.captures_iter(&c[1]).map(|k| k[1].to_string()));
    }
    for c in CALL.captures_iter(text) {
        out.extend(KW.captures_iter(&c[1]).map(|k| k[1].to_string()));
    }
    let mut seen = Vec::new();
    out.retain(|k| {
        let new = !seen.contains(k);
        seen.push(k.clone());
        new
    });
    out
}

/// Python run for an in-tree PEP 517 backend: import it from `backend-path` and call the hooks
/// pip calls, in pip's order.
const PEP517: &str = r#"import importlib, os, sys, tempfile
sys.path[:0] = [os.path.abspath(p) for p in PATHS]
mod, _, attr = BACKEND.partition(":")
b = importlib.import_module(mod)
for a in filter(None, attr.split(".")):
    b = getattr(b, a)
d = tempfile.mkdtemp()
for name, args in (("get_requires_for_build_wheel", ()), ("prepare_metadata_for_build_wheel", (d,)), ("build_wheel", (d,))):
    f = getattr(b, name, None)
    if f is not None:
        try:
            f(*args)
        except Exception as e:
            print(name, "failed:", e, file=sys.stderr)
"#;

fn pyproject(
    unit: &SkillUnit,
    path: &str,
    text: &str,
    cwd: &str,
    not_run: &mut Vec<(String, String)>,
) -> Vec<Draft> {
    let v: toml::Value = match text.parse() {
        Ok(v) => v,
        Err(e) => {
            not_run.push((
                path.to_string(),
                format!("invalid TOML: {}", brief(&e.to_string())),
            ));
            return Vec::new();
        }
    };
    let mut out = Vec::new();
    let bs = v.get("build-system");
    let backend = bs
        .and_then(|b| b.get("build-backend"))
        .and_then(|b| b.as_str());
    let paths: Vec<String> = bs
        .and_then(|b| b.get("backend-path"))
        .and_then(|p| p.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let mk = |label: String, code: String| {
        let mut d = Draft::new(
            StepKind::LifecycleHook,
            label,
            vec!["python3".into(), "-c".into(), code],
            cwd,
            Source::file(path),
        );
        d.scripts = Vec::new();
        d
    };
    match (backend, paths.is_empty()) {
        (Some(b), false) => {
            let code = format!(
                "PATHS = {}\nBACKEND = {}\n{PEP517}",
                py_list(&paths),
                py_str(b)
            );
            out.push(mk(format!("pep517 in-tree backend {b} ({path})"), code));
        }
        (Some(b), true) if !matches!(b.split([':', '.']).next(), Some("setuptools")) => {
            not_run.push((
                format!("{path} build backend {b}"),
                "installed from an index, not in the bundle: no in-tree code to run".into(),
            ));
        }
        _ => {}
    }
    // setuptools command classes named in pyproject: importing their module runs its code.
    let cmdclass = v
        .get("tool")
        .and_then(|t| t.get("setuptools"))
        .and_then(|t| t.get("cmdclass"))
        .and_then(|t| t.as_table());
    for (cmd, target) in cmdclass.into_iter().flatten() {
        let Some(target) = target.as_str() else {
            continue;
        };
        let module = target.rsplit_once('.').map_or(target, |(m, _)| m);
        let code = format!(
            "import importlib, sys\nsys.path.insert(0, '.')\nimportlib.import_module({})\n",
            py_str(module)
        );
        out.push(mk(
            format!("setuptools cmdclass {cmd} → {target} ({path})"),
            code,
        ));
    }
    // Hatch custom build hooks: a Python file run at build time.
    let hatch = v
        .get("tool")
        .and_then(|t| t.get("hatch"))
        .and_then(|t| t.get("build"))
        .and_then(|t| t.get("hooks"))
        .and_then(|t| t.get("custom"));
    if let Some(h) = hatch {
        let file = h
            .get("path")
            .and_then(|p| p.as_str())
            .unwrap_or("hatch_build.py");
        let mut d = mk(format!("hatch build hook {file} ({path})"), String::new());
        d.argv = vec!["python3".into(), file.to_string()];
        d.scripts = scripts_named(unit, dir_of(path), file);
        out.push(d);
    }
    out
}

fn py_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "''".into())
}

fn py_list(v: &[String]) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "[]".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cmdclass_forms() {
        assert_eq!(
            cmdclass_keys("setup(cmdclass={'install': PostInstall, \"develop\": D})"),
            ["install", "develop"]
        );
        assert_eq!(
            cmdclass_keys("setup(cmdclass=dict(egg_info=E, install=I))"),
            ["egg_info", "install"]
        );
        assert!(cmdclass_keys("setup(name='x')").is_empty());
    }
}
