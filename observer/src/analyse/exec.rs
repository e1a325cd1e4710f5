//! Programs: which execs count as `execution`, and the exec-shaped indicators (remote execution,
//! persistence and tool tampering by command).

use super::observe::{ExecObs, Observations};
use super::paths::{normalize, Layout};
use std::collections::{HashMap, HashSet};

const INTERPRETERS: &[&str] = &[
    "sh",
    "bash",
    "dash",
    "zsh",
    "ksh",
    "mksh",
    "fish",
    "ash",
    "busybox",
    "python",
    "python2",
    "python3",
    "pypy",
    "pypy3",
    "node",
    "nodejs",
    "deno",
    "bun",
    "perl",
    "ruby",
    "php",
    "lua",
    "rscript",
    "pwsh",
    "osascript",
    "env",
    "tsx",
    "ts-node",
    "uv",
];
const SHELLS: &[&str] = &["sh", "bash", "dash", "zsh", "ksh", "mksh", "fish", "ash"];
const DOWNLOADERS: &[&str] = &[
    "curl ",
    "wget ",
    "fetch ",
    "aria2c ",
    "invoke-webrequest",
    "iwr ",
    "irm ",
    "urlopen",
    "urllib",
    "requests.get",
    "http.get",
    "https.get",
    "fetch(",
    "nc ",
    "ncat ",
    "/dev/tcp/",
];

pub fn basename(p: &str) -> String {
    p.rsplit('/').next().unwrap_or(p).to_ascii_lowercase()
}

/// `python3.11` → `python3`: interpreter names carry versions.
fn interp_name(p: &str) -> String {
    let b = basename(p);
    let trimmed = b.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    if trimmed == "python" && b.starts_with("python3") {
        "python3".into()
    } else if trimmed.is_empty() {
        b
    } else {
        trimmed.to_string()
    }
}

fn is_interpreter(program: &str) -> bool {
    let n = interp_name(program);
    INTERPRETERS.contains(&n.as_str()) || INTERPRETERS.contains(&basename(program).as_str())
}

fn is_shell(program: &str) -> bool {
    SHELLS.contains(&interp_name(program).as_str())
}

/// The bundled script this exec runs when it is the agent launching the skill's own code:
/// the program itself lies in the skill folder, or an interpreter is handed a file from it
/// (directly or as a shell `-c` that is one simple command).
fn bundled_script(e: &ExecObs, layout: &Layout) -> Option<String> {
    if layout.in_skill(&e.path) {
        return Some(e.path.clone());
    }
    if layout.in_skill(&e.program) {
        return Some(e.program.clone());
    }
    if !is_interpreter(&e.program) {
        return None;
    }
    let cwd = if e.cwd.is_empty() {
        None
    } else {
        Some(e.cwd.as_str())
    };
    let in_skill = |a: &str| {
        let n = normalize(a, cwd);
        (layout.in_skill(&n) && n != layout.skill_dir).then_some(n)
    };
    let args: Vec<&String> = e.argv.iter().skip(1).collect();
    if is_shell(&e.program) {
        if let Some(i) = args.iter().position(|a| a.as_str() == "-c") {
            let cmd = args.get(i + 1)?;
            if cmd.contains([';', '|', '&', '$', '`', '<', '>', '(', ')', '{', '}', '\n']) {
                return None;
            }
            let toks: Vec<&str> = cmd.split_whitespace().collect();
            let first = toks.first()?;
            if !is_interpreter(first) && in_skill(first).is_none() {
                return None;
            }
            return toks.iter().find_map(|t| in_skill(t));
        }
    }
    args.iter()
        .filter(|a| !a.starts_with('-') && !a.contains('='))
        .find_map(|a| in_skill(a))
}

/// Mark each exec's `execution` flag: everything but the agent step's own launch of a bundled
/// script (the first exec after `step_start`, and the interpreter it hands the same script to).
pub fn classify_execution(o: &mut Observations, layout: &Layout) {
    let mut first_seen: HashSet<u32> = HashSet::new();
    let mut launch: HashMap<u32, (HashSet<i32>, String)> = HashMap::new();
    let parent = o.parent.clone();
    for e in o.execs.iter_mut() {
        let Some(step) = e.step else {
            // Outside any step: the agent harness itself, not the skill.
            e.execution = false;
            continue;
        };
        if first_seen.insert(step) {
            if let Some(script) = bundled_script(e, layout) {
                e.execution = false;
                launch.insert(step, (HashSet::from([e.pid]), script));
            }
            continue;
        }
        if let Some((pids, script)) = launch.get_mut(&step) {
            let related =
                pids.contains(&e.pid) || parent.get(&e.pid).is_some_and(|p| pids.contains(p));
            if related && bundled_script(e, layout).as_deref() == Some(script.as_str()) {
                e.execution = false;
                pids.insert(e.pid);
            } else if pids.contains(&e.pid) {
                // The launcher process went on to run something else: the chain ends.
                pids.remove(&e.pid);
            }
        }
    }
}

fn cmdline(e: &ExecObs) -> String {
    e.argv.join(" ").to_ascii_lowercase()
}

/// Code an interpreter reads from stdin (`sh`, `bash -s`, `python3 -`, `node` with no script).
fn reads_code_from_stdin(e: &ExecObs) -> bool {
    if !is_interpreter(&e.program) || interp_name(&e.program) == "env" {
        return false;
    }
    let args: Vec<&str> = e.argv.iter().skip(1).map(|s| s.as_str()).collect();
    if args.iter().any(|a| {
        matches!(
            *a,
            "-c" | "-e" | "-m" | "--eval" | "-r" | "--version" | "-V"
        )
    }) {
        return false;
    }
    args.iter().all(|a| a.starts_with('-')) || args.contains(&"-") || args.contains(&"-s")
}

/// Why a command line runs fetched content, if it does (`curl … | sh`, `sh -c "$(curl …)"`,
/// `bash <(wget …)`, `python -c "exec(urlopen(…).read())"`).
fn fetch_and_run_cmd(e: &ExecObs) -> Option<&'static str> {
    let c = cmdline(e);
    let has_dl = DOWNLOADERS.iter().any(|d| c.contains(d))
        || c.contains("http://")
        || c.contains("https://");
    if !has_dl {
        return None;
    }
    let segs: Vec<&str> = c.split('|').collect();
    if segs.len() > 1 {
        let dl_at = segs
            .iter()
            .position(|s| DOWNLOADERS.iter().any(|d| s.contains(d)) || s.contains("://"));
        if let Some(i) = dl_at {
            for s in &segs[i + 1..] {
                let mut words = s
                    .split_whitespace()
                    .filter(|w| !matches!(*w, "sudo" | "env" | "exec" | "-"));
                if let Some(w) = words.next() {
                    let rest: Vec<&str> = words.collect();
                    let takes_code = !rest.iter().any(|r| matches!(*r, "-c" | "-e" | "-m"));
                    if is_interpreter(w) && takes_code {
                        return Some("download piped into an interpreter");
                    }
                }
            }
        }
    }
    for pat in [
        "$(curl", "$(wget", "`curl", "`wget", "<(curl", "<(wget", "$(fetch",
    ] {
        if c.contains(pat)
            && (c.contains("eval")
                || c.contains("sh -c")
                || c.contains("source")
                || c.contains(". <(")
                || c.contains("bash <(")
                || c.contains("sh <("))
        {
            return Some("download substituted into a shell");
        }
    }
    let runs_code = [
        "exec(",
        "eval(",
        "function(",
        "new function",
        "compile(",
        "vm.runin",
        "iex ",
        "invoke-expression",
    ]
    .iter()
    .any(|p| c.contains(p));
    let inline = e
        .argv
        .iter()
        .any(|a| matches!(a.as_str(), "-c" | "-e" | "--eval" | "-command"));
    if inline && runs_code && is_interpreter(&e.program) {
        return Some("interpreter evaluates fetched code inline");
    }
    None
}

/// REMOTE_EXEC findings: (summary, evidence).
pub fn remote_exec(o: &Observations) -> Vec<(String, Vec<u64>)> {
    let mut out = Vec::new();
    let net_pids: HashSet<i32> = o.egress.iter().map(|g| g.pid).collect();
    let net_seq: HashMap<i32, u64> = o.egress.iter().fold(HashMap::new(), |mut m, g| {
        m.entry(g.pid).or_insert(g.seq);
        m
    });
    // 1. the command line says so
    for e in &o.execs {
        if let Some(why) = fetch_and_run_cmd(e) {
            out.push((format!("{why}: {}", short(&e.argv.join(" "))), vec![e.seq]));
        }
    }
    // 2. a pipeline: a sibling fetched while an interpreter read its code from stdin
    for e in o.execs.iter().filter(|e| e.ok && reads_code_from_stdin(e)) {
        let Some(pp) = o.parent.get(&e.pid) else {
            continue;
        };
        let sib = o
            .parent
            .iter()
            .filter(|(c, p)| *p == pp && **c != e.pid)
            .map(|(c, _)| *c)
            .filter(|c| net_pids.contains(c))
            .min();
        if let Some(s) = sib {
            let mut ev = vec![e.seq];
            ev.extend(net_seq.get(&s));
            out.push((
                format!(
                    "{} reads code from a pipe fed by a process that fetched from the network",
                    basename(&e.program)
                ),
                ev,
            ));
        }
    }
    // 2b. a shell whose code came through a pipe (a decoded stage: `… | base64 -d | sh`) runs a
    // downloader that prints what it fetched: inside such a shell its output can only come back
    // through `$(…)`, the shape of `eval "$(curl …)"`. Shells running code from a file or `-c`
    // are left to rule 1 and the file rules: there `x=$(curl …)` is ordinary data.
    for e in o
        .execs
        .iter()
        .filter(|e| e.ok && is_shell(&e.program) && reads_code_from_stdin(e))
    {
        let child = o.execs.iter().find(|c| {
            c.ok && c.seq > e.seq
                && o.parent.get(&c.pid) == Some(&e.pid)
                && net_pids.contains(&c.pid)
                && downloads_to_stdout(&c.argv)
        });
        if let Some(c) = child {
            let mut ev = vec![e.seq, c.seq];
            ev.extend(net_seq.get(&c.pid));
            out.push((
                format!(
                    "{} reads its code from a pipe and takes back what {} fetched: {}",
                    basename(&e.program),
                    basename(&c.program),
                    short(&c.argv.join(" "))
                ),
                ev,
            ));
        }
    }
    // 3. a file written by a process that talked to the network, later run
    let mut fetched: HashMap<String, u64> = HashMap::new();
    let rename_from: HashMap<u64, &super::observe::FileObs> = o
        .files
        .iter()
        .filter(|f| f.access == crate::report::FileAccess::RenameFrom)
        .map(|f| (f.seq, f))
        .collect();
    for f in &o.files {
        if f.access.is_write() && !f.failed && net_pids.contains(&f.pid) {
            fetched.entry(f.path.clone()).or_insert(f.seq);
        }
        if f.access == crate::report::FileAccess::RenameTo {
            // follow a fetched file through `mv`
            if let Some(src) = rename_from.get(&f.seq) {
                if let Some(s) = fetched.get(&src.path).copied() {
                    fetched.insert(f.path.clone(), s);
                }
            }
        }
    }
    for e in &o.execs {
        if e.err.as_deref() == Some("ENOENT") {
            continue;
        }
        let cwd = (!e.cwd.is_empty()).then_some(e.cwd.as_str());
        let mut cands = vec![e.path.clone(), e.program.clone()];
        if is_interpreter(&e.program) {
            cands.extend(
                e.argv
                    .iter()
                    .skip(1)
                    .filter(|a| !a.starts_with('-'))
                    .map(|a| normalize(a, cwd)),
            );
        }
        if let Some((path, wseq)) = cands
            .iter()
            .find_map(|c| fetched.get(c).filter(|s| **s < e.seq).map(|s| (c, *s)))
        {
            out.push((
                format!("downloaded file {path} was executed"),
                vec![wseq, e.seq],
            ));
        }
        // fileless: a program run from a memfd or an fd path
        if let Some(p) = [&e.path, &e.program].into_iter().find(|p| fileless(p)) {
            out.push((format!("fileless execution from {p}"), vec![e.seq]));
        }
    }
    out
}

/// A downloader command line whose fetched body goes to stdout (`curl URL`, `wget -qO- URL`),
/// not to a file.
fn downloads_to_stdout(argv: &[String]) -> bool {
    let Some(prog) = argv.first().map(|p| basename(p)) else {
        return false;
    };
    let args = &argv[1..];
    let has_url = args.iter().any(|a| a.contains("://"));
    match prog.as_str() {
        "curl" => {
            let to_file = args
                .windows(2)
                .any(|w| matches!(w[0].as_str(), "-o" | "--output") && w[1] != "-")
                || args.iter().any(|a| {
                    matches!(a.as_str(), "-O" | "--remote-name" | "--remote-name-all")
                        || (a.starts_with("-o") && a.len() > 2 && a != "-o-")
                        || (a.starts_with('-') && !a.starts_with("--") && a.ends_with('O'))
                });
            has_url && !to_file
        }
        "wget" => {
            let to_stdout = args
                .windows(2)
                .any(|w| matches!(w[0].as_str(), "-O" | "--output-document") && w[1] == "-")
                || args.iter().any(|a| {
                    a == "--output-document=-"
                        || (a.starts_with('-') && !a.starts_with("--") && a.ends_with("O-"))
                });
            has_url && to_stdout
        }
        _ => false,
    }
}

fn fileless(p: &str) -> bool {
    let fd_path = p
        .strip_prefix("/proc/")
        .and_then(|r| r.split_once('/'))
        .is_some_and(|(_, rest)| rest.starts_with("fd/"));
    p.starts_with("/memfd:") || p.ends_with("(deleted)") || p.starts_with("/dev/fd/") || fd_path
}

/// Persistence installed by running a command (crontab, systemctl enable, launchctl load, at).
pub fn persistence_commands(o: &Observations) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    let mut check = |seq: u64, prog: &str, argv: &[String]| {
        let args: Vec<String> = argv
            .iter()
            .skip(1)
            .map(|a| a.to_ascii_lowercase())
            .collect();
        let has = |w: &str| args.iter().any(|a| a == w);
        let hit = match prog {
            "crontab" => !args.is_empty() && !has("-l"),
            "systemctl" => has("enable") || has("link") || (has("--user") && has("start")),
            "launchctl" => has("load") || has("bootstrap") || has("submit") || has("enable"),
            "at" | "batch" => !has("-l") && !has("-r"),
            "loginctl" => has("enable-linger"),
            "git" => args.iter().any(|a| a.starts_with("core.hookspath")),
            _ => false,
        };
        if hit {
            out.push((format!("{prog} {}", short(&args.join(" "))), seq));
        }
    };
    for e in o.execs.iter().filter(|e| e.ok) {
        check(e.seq, &basename(&e.program), &e.argv);
    }
    for (seq, prog, argv) in &o.shims {
        check(*seq, prog, argv);
    }
    out
}

/// Package managers or git pointed elsewhere by command (`npm config set registry …`).
pub fn tamper_commands(o: &Observations) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    for e in o.execs.iter().filter(|e| e.ok) {
        let c = cmdline(e);
        let prog = basename(&e.program);
        let hit = match prog.as_str() {
            "npm" | "yarn" | "pnpm" | "bun" => {
                c.contains("registry") && (c.contains(" set") || c.contains("config"))
            }
            p if p.starts_with("pip") => c.contains("config") && c.contains("index-url"),
            "uv" => c.contains("config") && c.contains("index"),
            "gem" => c.contains("sources") && c.contains("--add"),
            "conda" => c.contains("config") && c.contains("channels"),
            "git" => {
                c.contains("--global")
                    && (c.contains("insteadof")
                        || c.contains("core.sshcommand")
                        || c.contains("credential.helper"))
            }
            _ => false,
        };
        if hit {
            out.push((short(&e.argv.join(" ")), e.seq));
        }
    }
    out
}

pub fn short(s: &str) -> String {
    const MAX: usize = 160;
    let one: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if one.chars().count() <= MAX {
        one
    } else {
        format!("{}…", one.chars().take(MAX).collect::<String>())
    }
}

/// Programs keyed so that baselines compare across runs: paths under run-specific folders are
/// spelled relative to them, temp files collapse to `<temp>`.
pub fn program_key(program: &str, layout: &Layout) -> String {
    let tail = |n: usize| program.get(n..).unwrap_or("").to_string();
    if layout.in_skill(program) {
        format!("<skill>{}", tail(layout.skill_dir.len()))
    } else if layout.in_temp(program) {
        "<temp>".into()
    } else if layout.in_workspace(program) {
        format!("<workspace>{}", tail(layout.workspace.len()))
    } else if !layout.home.is_empty() && layout.under(program, &layout.home) {
        format!("~{}", tail(layout.home.len()))
    } else {
        program.to_string()
    }
}
