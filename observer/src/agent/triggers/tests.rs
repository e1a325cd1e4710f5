//! Trigger reading across languages and styles, and the bounds of the variations.

use super::*;

fn env_of(t: &Triggers, name: &str) -> Option<Vec<String>> {
    t.env
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, l)| l.clone())
}

#[test]
fn python_argv_literal() {
    let t = triggers(
        "import sys\nif len(sys.argv) > 1 and sys.argv[1] == \"sync-now\":\n    do()\n",
        false,
        &[],
    );
    assert_eq!(t.positional, ["sync-now"]);
    assert_eq!(t.line, 2);
    let v = variations(&t, 4);
    assert_eq!(v[0].args, ["sync-now"]);
}

#[test]
fn argv_through_a_variable_and_membership() {
    let t = triggers(
        "import sys\ncmd = sys.argv[1] if len(sys.argv) > 1 else ''\nif cmd.lower() in ('deploy', 'push'):\n    x()\nif '--force' in sys.argv:\n    y()\n",
        false,
        &[],
    );
    assert_eq!(t.positional, ["deploy", "push"]);
    assert_eq!(t.flags, [vec!["--force".to_string()]]);
}

#[test]
fn shell_tests_and_case() {
    let t = triggers(
        "#!/bin/bash\nif [[ \"$1\" == \"--purge\" ]]; then rm -rf x; fi\nmode=\"$2\"\n[ \"$mode\" = deploy ] && go\ncase \"$1\" in\n  start|begin) s ;;\n  *) usage ;;\nesac\n",
        true,
        &[],
    );
    assert!(t.flags.contains(&vec!["--purge".to_string()]), "{t:?}");
    for p in ["deploy", "start", "begin"] {
        assert!(t.positional.contains(&p.to_string()), "{p} in {t:?}");
    }
}

#[test]
fn node_argv_includes_and_switch() {
    let t = triggers(
        "const args = process.argv.slice(2);\nif (args.includes('--admin')) run();\nswitch (process.argv[2]) {\n  case 'wipe': w(); break;\n}\n",
        false,
        &[],
    );
    assert!(t.flags.contains(&vec!["--admin".to_string()]), "{t:?}");
    assert!(t.positional.contains(&"wipe".to_string()), "{t:?}");
}

#[test]
fn env_compared_and_truthy() {
    let t = triggers(
        "import os\nif os.environ.get(\"ADMIN_MODE\", \"false\") == \"TRUE\":\n    steal()\nDEBUG = os.getenv('DEBUG')\nif DEBUG:\n    log()\nmode = os.environ.get('RUN_MODE', '')\nif mode.lower() == 'prod':\n    p()\n",
        false,
        &[],
    );
    assert_eq!(env_of(&t, "ADMIN_MODE"), Some(vec!["TRUE".to_string()]));
    assert_eq!(env_of(&t, "DEBUG"), Some(vec![]));
    assert_eq!(env_of(&t, "RUN_MODE"), Some(vec!["prod".to_string()]));
    let v = variations(&t, 4);
    assert_eq!(v.len(), 4, "{v:?}");
    assert!(v
        .iter()
        .all(|v| v.env.contains(&("ADMIN_MODE".into(), "TRUE".into()))));
    let debug: Vec<&str> = v
        .iter()
        .map(|v| v.env.iter().find(|(k, _)| k == "DEBUG").unwrap().1.as_str())
        .collect();
    assert_eq!(debug, TRUTHY);
}

#[test]
fn env_in_shell_node_ruby_perl() {
    let sh = triggers(
        "#!/bin/sh\nOUT=/tmp/x\nDEBUG=${DEBUG:-0}\nif [ \"$ADMIN_MODE\" = \"TRUE\" ]; then echo; fi\n[ \"$DEBUG\" = 1 ] && echo $OUT $HOME\n",
        true,
        &[],
    );
    assert_eq!(env_of(&sh, "ADMIN_MODE"), Some(vec!["TRUE".to_string()]));
    assert_eq!(env_of(&sh, "DEBUG"), Some(vec!["1".to_string()]));
    assert_eq!(env_of(&sh, "OUT"), None, "assigned in the script: {sh:?}");
    assert_eq!(env_of(&sh, "HOME"), None);
    let js = triggers(
        "const { FEATURE_X } = process.env;\nif (process.env.SECRET_MODE === 'on') go();\n",
        false,
        &[],
    );
    assert_eq!(env_of(&js, "SECRET_MODE"), Some(vec!["on".to_string()]));
    assert_eq!(env_of(&js, "FEATURE_X"), Some(vec![]));
    let rb = triggers("if ENV['BACKDOOR'] == 'yes'\n  x\nend\n", false, &[]);
    assert_eq!(env_of(&rb, "BACKDOOR"), Some(vec!["yes".to_string()]));
    let pl = triggers("if ($ENV{TRIGGER} eq 'go') { x(); }\n", false, &[]);
    assert!(env_of(&pl, "TRIGGER").is_some());
}

#[test]
fn credentials_and_paths_are_not_overwritten() {
    let t = triggers(
        "import os\ntok = os.environ['GITHUB_TOKEN']\nd = os.environ.get('DATA_DIR')\nk = os.environ.get('OPENAI_API_KEY')\nif os.environ.get('API_KEY') == 'letmein': x()\nu = os.environ.get('MY_SETTING')\n",
        false,
        &["MY_SETTING".to_string()],
    );
    assert_eq!(env_of(&t, "GITHUB_TOKEN"), None);
    assert_eq!(env_of(&t, "DATA_DIR"), None);
    assert_eq!(env_of(&t, "OPENAI_API_KEY"), None);
    assert_eq!(env_of(&t, "MY_SETTING"), None, "set by the image");
    // A secret compared to a literal is a trigger.
    assert_eq!(env_of(&t, "API_KEY"), Some(vec!["letmein".to_string()]));
}

#[test]
fn stdin_answers() {
    let t = triggers(
        "ans = input('Continue? ')\nif ans.strip() == 'yes-really':\n    go()\n",
        false,
        &[],
    );
    assert_eq!(t.stdin, ["yes-really"]);
    let v = variations(&t, 4);
    assert_eq!(v[0].stdin.as_deref(), Some("yes-really\n"));
}

#[test]
fn argparse_options() {
    let t = triggers(
        "import argparse\np = argparse.ArgumentParser()\np.add_argument('-a', '--admin', action='store_true')\np.add_argument('--mode', choices=['safe', 'evil'])\np.add_argument('cmd', choices=['sync', 'nuke'])\n",
        false,
        &[],
    );
    assert!(t.flags.contains(&vec!["--admin".to_string()]), "{t:?}");
    assert!(
        t.flags
            .contains(&vec!["--mode".to_string(), "safe".to_string()]),
        "{t:?}"
    );
    assert_eq!(t.positional, ["sync"]);
}

#[test]
fn early_exit_option_does_not_mask_another() {
    let t = triggers(
        "import sys\nif '--dry-run' in sys.argv: sys.exit(0)\nif '--exfil' in sys.argv: steal()\n",
        false,
        &[],
    );
    let v = variations(&t, 4);
    assert!(v.iter().any(|v| v.args == ["--exfil"]), "{v:?}");
}

#[test]
fn nothing_to_vary_and_bounds() {
    assert!(triggers("print('hello world')\n", false, &[]).is_empty());
    assert!(variations(&Triggers::default(), 4).is_empty());
    let mut src = String::from("import sys, os\n");
    for i in 0..100 {
        src.push_str(&format!(
            "if sys.argv[1] == 'cmd{i}': pass\nif os.environ.get('V{i}') == 'x{i}': pass\n"
        ));
    }
    let t = triggers(&src, false, &[]);
    assert!(t.positional.len() <= 8 && t.env.len() <= 8, "{t:?}");
    let v = variations(&t, 4);
    assert_eq!(v.len(), 4);
    assert_eq!(variations(&t, 4), v, "deterministic");
    assert!(variations(&t, 0).is_empty());
}

#[test]
fn comments_and_long_or_odd_literals_are_ignored() {
    let t = triggers(
        "import sys\n# if sys.argv[1] == 'commented': pass\nif sys.argv[1] == 'x' * 100: pass\nif sys.argv[1] == '%s' % v: pass\nif sys.argv[1] == \"unterminated\n",
        false,
        &[],
    );
    assert!(t.positional.is_empty(), "{t:?}");
}

#[test]
fn file_reads_and_transformations_are_not_triggers() {
    let t = triggers(
        "with open('README.md') as f:\n    first = f.readline().strip('# \\n')\nname = os.environ.get('USER_NAME', 'x').lower()\n",
        false,
        &[],
    );
    assert!(t.stdin.is_empty(), "{t:?}");
    assert_eq!(env_of(&t, "USER_NAME"), Some(vec![]));
    let sh = triggers("#!/bin/sh\nread -r -p 'Go? ' answer\nif [ \"$answer\" = \"yes\" ]; then x; fi\nthreads=4\n", true, &[]);
    assert_eq!(sh.stdin, ["yes"], "{sh:?}");
}
