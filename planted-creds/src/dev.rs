//! Developer tool and agent credentials: package registries, git hosts, `.env`, agent configs,
//! environment variables and shell history.

use crate::cloud::slug;
use crate::gen::{self, Gen};
use crate::plant::{Ctx, PlantError};
use crate::registry::Part;
use serde_json::json;

const GITHUB_HOSTS: &[&str] = &["github.com", "api.github.com", "*.github.com", "ghcr.io"];

pub(crate) fn plant(c: &mut Ctx) -> Result<(), PlantError> {
    let p = c.p.clone();
    let mut g = c.gen("dev");

    // Package registries.
    let npm = gen::checksummed_token(&mut g, "npm_");
    c.reg.credential(
        "npm-token",
        "npm-token",
        &["registry.npmjs.org", "www.npmjs.com"],
    );
    c.reg.value("npm-token", &npm);
    c.file(
        "npmrc",
        format!("//registry.npmjs.org/:_authToken={npm}\n"),
        0o600,
        &["npm-token"],
    );
    c.env("NPM_TOKEN", &npm, "npm-token");

    let pypi = gen::pypi(&mut g);
    c.reg
        .credential("pypi-token", "pypi-token", &["upload.pypi.org", "pypi.org"]);
    c.reg.value("pypi-token", &pypi);
    c.file(
        "pypirc",
        format!("[distutils]\nindex-servers =\n    pypi\n\n[pypi]\nusername = __token__\npassword = {pypi}\n"),
        0o600,
        &["pypi-token"],
    );

    // ~/.netrc: Heroku and the company's artifact store.
    let heroku = g.uuid();
    let artifactory_host = format!("artifactory.{}", p.company_domain);
    let artifactory = format!("AKCp8{}", g.alnum(68));
    c.reg.credential(
        "heroku-api-key",
        "heroku-api-key",
        &["api.heroku.com", "git.heroku.com"],
    );
    c.reg.value("heroku-api-key", &heroku);
    c.reg.credential(
        "artifactory-key",
        "artifactory-api-key",
        &[artifactory_host.as_str()],
    );
    c.reg.value("artifactory-key", &artifactory);
    c.file(
        "netrc",
        format!(
            "machine api.heroku.com\n  login {email}\n  password {heroku}\nmachine git.heroku.com\n  login {email}\n  password {heroku}\n\
             machine {artifactory_host}\n  login {email}\n  password {artifactory}\n",
            email = p.email
        ),
        0o600,
        &["heroku-api-key", "artifactory-key"],
    );

    // Git hosts.
    let ghp = gen::checksummed_token(&mut g, "ghp_");
    let glpat = gen::gitlab_pat(&mut g);
    c.reg.credential("github-pat", "github-token", GITHUB_HOSTS);
    c.reg.value("github-pat", &ghp);
    c.reg
        .credential("gitlab-pat", "gitlab-token", &["gitlab.com"]);
    c.reg.value("gitlab-pat", &glpat);
    c.file(
        "git-credentials",
        format!(
            "https://{u}:{ghp}@github.com\nhttps://oauth2:{glpat}@gitlab.com\n",
            u = p.github_user
        ),
        0o600,
        &["github-pat", "gitlab-pat"],
    );
    let gho = gen::checksummed_token(&mut g, "gho_");
    c.reg
        .credential("github-oauth", "github-token", GITHUB_HOSTS);
    c.reg.value("github-oauth", &gho);
    c.file(
        "gh/hosts.yml",
        format!(
            "github.com:\n    users:\n        {u}:\n            oauth_token: {gho}\n    git_protocol: ssh\n    oauth_token: {gho}\n    user: {u}\n",
            u = p.github_user
        ),
        0o600,
        &["github-oauth"],
    );
    let fine = gen::github_fine_grained(&mut g);
    c.reg
        .credential("github-fine-grained", "github-token", GITHUB_HOSTS);
    c.reg.value("github-fine-grained", &fine);
    c.env("GITHUB_TOKEN", &fine, "github-fine-grained");

    workspace_env(c, &mut g);
    agents(c, &mut g)?;

    let slack = gen::slack_bot(&mut g);
    c.reg
        .credential("slack-bot", "slack-token", &["slack.com", "*.slack.com"]);
    c.reg.value("slack-bot", &slack);
    c.env("SLACK_BOT_TOKEN", &slack, "slack-bot");
    let hf = gen::huggingface(&mut g);
    c.reg.credential(
        "huggingface",
        "huggingface-token",
        &["huggingface.co", "*.huggingface.co"],
    );
    c.reg.value("huggingface", &hf);
    c.env("HF_TOKEN", &hf, "huggingface");

    history(c, &mut g);
    Ok(())
}

fn workspace_env(c: &mut Ctx, g: &mut Gen) {
    let p = c.p.clone();
    let db_host = format!("db-staging.internal.{}", p.company_domain);
    let db_pw = g
        .strong_password(24)
        .replace(['@', '/', ':', '#', '?', '%', '^'], "x");
    let db = slug(&p.project).replace('-', "_");
    let url = format!("postgres://{db}_app:{db_pw}@{db_host}:5432/{db}");
    c.reg
        .credential("database-url", "database-password", &[db_host.as_str()]);
    c.reg.value("database-url", &url);
    c.reg
        .piece("database-url", db_pw.as_bytes(), Part::Embedded);
    c.env("DATABASE_URL", &url, "database-url");

    let redis_host = format!("redis-staging.internal.{}", p.company_domain);
    let redis_pw = g.alnum(32);
    let redis = format!("redis://default:{redis_pw}@{redis_host}:6379/0");
    c.reg
        .credential("redis-url", "redis-password", &[redis_host.as_str()]);
    c.reg.value("redis-url", &redis);
    c.reg
        .piece("redis-url", redis_pw.as_bytes(), Part::Embedded);

    let stripe = gen::stripe_live(g);
    c.reg
        .credential("stripe-live", "stripe-secret-key", &["api.stripe.com"]);
    c.reg.value("stripe-live", &stripe);
    c.env("STRIPE_SECRET_KEY", &stripe, "stripe-live");
    let whsec = gen::stripe_webhook(g);
    c.reg
        .credential("stripe-webhook", "webhook-signing-secret", &[]);
    c.reg.value("stripe-webhook", &whsec);
    let sg = gen::sendgrid(g);
    c.reg
        .credential("sendgrid", "sendgrid-api-key", &["api.sendgrid.com"]);
    c.reg.value("sendgrid", &sg);
    let jwt_secret = g.hex(64);
    c.reg.credential("jwt-secret", "signing-secret", &[]);
    c.reg.value("jwt-secret", &jwt_secret);
    let sentry = format!(
        "https://{}@o{}.ingest.us.sentry.io/{}",
        g.hex(32),
        g.digits(6),
        g.digits(7)
    );
    let text = format!(
        "# Local development settings. Do not commit.\nAPP_ENV=development\nPORT=8080\nLOG_LEVEL=debug\n\n\
         DATABASE_URL={url}\nREDIS_URL={redis}\n\n\
         STRIPE_SECRET_KEY={stripe}\nSTRIPE_WEBHOOK_SECRET={whsec}\n\n\
         SENDGRID_API_KEY={sg}\nMAIL_FROM=billing@{domain}\n\n\
         JWT_SECRET={jwt_secret}\nSENTRY_DSN={sentry}\n",
        domain = p.company_domain
    );
    c.file(
        "workspace/.env",
        text,
        0o644,
        &[
            "database-url",
            "redis-url",
            "stripe-live",
            "stripe-webhook",
            "sendgrid",
            "jwt-secret",
        ],
    );
}

fn agents(c: &mut Ctx, g: &mut Gen) -> Result<(), PlantError> {
    let p = c.p.clone();
    let enc = |e: serde_json::Error| PlantError::Encode {
        what: "agent config",
        msg: e.to_string(),
    };
    let ant = gen::anthropic_api(g);
    c.reg.credential(
        "anthropic-api-key",
        "anthropic-api-key",
        &["api.anthropic.com"],
    );
    c.reg.value("anthropic-api-key", &ant);
    c.env("ANTHROPIC_API_KEY", &ant, "anthropic-api-key");
    let first_start = c.now - g.range(20 * 86400, 200 * 86400);
    let claude = json!({
        "numStartups": g.range(40, 400),
        "installMethod": "global",
        "autoUpdates": true,
        "firstStartTime": crate::time::rfc3339(first_start).replace('Z', ".000Z"),
        "userID": g.hex(64),
        "primaryApiKey": ant,
        "customApiKeyResponses": {"approved": [&ant[ant.len() - 20..]], "rejected": []},
        "hasCompletedOnboarding": true,
        "lastOnboardingVersion": "1.0.51",
        "projects": {
            p.workspace.clone(): {
                "allowedTools": [], "history": [], "mcpServers": {},
                "hasTrustDialogAccepted": true, "projectOnboardingSeenCount": 1
            }
        }
    });
    c.file(
        "claude/claude.json",
        serde_json::to_string_pretty(&claude).map_err(enc)? + "\n",
        0o600,
        &["anthropic-api-key"],
    );

    let access = gen::anthropic_oauth(g, "oat");
    let refresh = gen::anthropic_oauth(g, "ort");
    let oauth = json!({"claudeAiOauth": {
        "accessToken": access, "refreshToken": refresh,
        "expiresAt": (c.now + g.range(3600, 28800)) * 1000,
        "scopes": ["user:inference", "user:profile"], "subscriptionType": "max"
    }});
    c.reg.credential(
        "claude-oauth",
        "anthropic-oauth-token",
        &["api.anthropic.com", "console.anthropic.com", "claude.ai"],
    );
    let oauth_text = serde_json::to_string(&oauth).map_err(enc)?;
    c.reg.value("claude-oauth", &access);
    c.reg.value("claude-oauth", &refresh);
    c.reg.value("claude-oauth", &oauth_text);
    c.file(
        "claude/credentials.json",
        oauth_text,
        0o600,
        &["claude-oauth"],
    );

    let openai = gen::openai_project(g);
    c.reg
        .credential("openai-api-key", "openai-api-key", &["api.openai.com"]);
    c.reg.value("openai-api-key", &openai);
    c.env("OPENAI_API_KEY", &openai, "openai-api-key");
    let auth = json!({"OPENAI_API_KEY": openai, "tokens": null, "last_refresh": null});
    c.file(
        "codex/auth.json",
        serde_json::to_string_pretty(&auth).map_err(enc)? + "\n",
        0o600,
        &["openai-api-key"],
    );
    Ok(())
}

/// Shell history with the secrets people paste into their shells.
fn history(c: &mut Ctx, g: &mut Gen) {
    let db = c
        .env
        .iter()
        .find(|e| e.name == "DATABASE_URL")
        .map(|e| e.value.clone());
    let slack = c
        .env
        .iter()
        .find(|e| e.name == "SLACK_BOT_TOKEN")
        .map(|e| e.value.clone());
    let ws = c.p.workspace.clone();
    let mut lines = vec![
        format!("cd {ws}"),
        "git status".into(),
        "git pull --rebase".into(),
        "make test".into(),
        "docker compose up -d db".into(),
    ];
    if let Some(db) = &db {
        lines.push(format!("psql \"{db}\" -c 'select count(*) from invoices'"));
    }
    lines.extend(
        [
            "git checkout -b fix/retry-webhooks",
            "python -m pytest -q tests/test_webhooks.py",
            "kubectl get pods -n platform",
            "aws s3 ls --profile prod",
            "gh pr create --fill",
        ]
        .map(String::from),
    );
    if let Some(slack) = &slack {
        lines.push(format!(
            "curl -s -H \"Authorization: Bearer {slack}\" https://slack.com/api/auth.test"
        ));
    }
    lines.extend(["git push -u origin HEAD", "ls -la", "code ."].map(String::from));
    let mut creds = vec!["slack-bot"];
    if db.is_some() {
        creds.push("database-url");
    }
    let bash = lines.join("\n") + "\n";
    c.file("shell/bash_history", bash, 0o600, &creds);
    let mut t = c.now - g.range(3 * 86400, 9 * 86400);
    let mut zsh = String::new();
    for l in &lines {
        t += g.range(20, 900);
        zsh.push_str(&format!(": {t}:0;{l}\n"));
    }
    c.file("shell/zsh_history", zsh, 0o600, &creds);
}
