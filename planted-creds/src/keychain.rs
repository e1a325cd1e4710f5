//! macOS keychain items and the `login.keychain-db` file the `security` command reads.
//!
//! File layout: the keychain magic header (`kych`, version 1.0) on its own first line, then one
//! item per line: `class US service US account US label US protocol US password` with US the
//! ASCII unit separator (0x1f). The header never contains a newline or US byte, so a POSIX shell
//! `read` loop over `tail -n +2` parses the items.

use crate::gen::Gen;
use crate::plant::{Ctx, Flavor, KeychainClass, KeychainItem, PlantError, PlantedEnv};

pub const FIELD_SEP: char = '\u{1f}';

/// How Chrome derives its cookie key on this platform.
pub(crate) struct ChromeKey {
    pub password: String,
    pub iterations: u32,
}

pub(crate) fn plant(c: &mut Ctx) -> Result<ChromeKey, PlantError> {
    if c.p.flavor == Flavor::Linux {
        // Without a desktop keyring Chrome on Linux uses this fixed password ("v10" values).
        return Ok(ChromeKey {
            password: "peanuts".into(),
            iterations: 1,
        });
    }
    let mut g = c.gen("keychain");
    let safe = g.b64(16);
    let id = "chrome-safe-storage";
    c.reg.credential(id, "browser-encryption-key", &[]);
    c.reg.value(id, &safe);
    item(
        c,
        KeychainClass::Generic,
        "Chrome Safe Storage",
        "Chrome",
        "",
        &safe,
        id,
    );

    let ssid = format!(
        "{}-5G",
        g.pick(&["Lindenhof", "Blue Door", "Casa", "Fern St", "Birchwood"])
    );
    let wifi = g.human_password();
    c.reg.credential("wifi-password", "password", &[]);
    c.reg.value("wifi-password", &wifi);
    item(
        c,
        KeychainClass::Generic,
        "AirPort",
        &ssid,
        "",
        &wifi,
        "wifi-password",
    );

    // git credential-osxkeychain keeps the GitHub token as an internet password.
    if let Some(ghp) = github_pat(c) {
        let user = c.p.github_user.clone();
        item(
            c,
            KeychainClass::Internet,
            "github.com",
            &user,
            "htps",
            &ghp,
            "github-pat",
        );
    }
    if let Some(oauth) = c.files.get("claude/credentials.json") {
        let json = String::from_utf8_lossy(&oauth.bytes).to_string();
        let user = c.p.user.clone();
        item(
            c,
            KeychainClass::Generic,
            "Claude Code-credentials",
            &user,
            "",
            &json,
            "claude-oauth",
        );
    }
    let _ = &mut g;
    Ok(ChromeKey {
        password: safe,
        iterations: 1003,
    })
}

fn github_pat(c: &Ctx) -> Option<String> {
    let f = c.files.get("git-credentials")?;
    let text = String::from_utf8_lossy(&f.bytes);
    let start = text.find("ghp_")?;
    Some(text[start..start + 40].to_string())
}

fn item(
    c: &mut Ctx,
    class: KeychainClass,
    service: &str,
    account: &str,
    protocol: &str,
    password: &str,
    credential: &str,
) {
    c.keychain.push(KeychainItem {
        class,
        service: service.into(),
        account: account.into(),
        label: service.into(),
        protocol: protocol.into(),
        password: password.into(),
        credential: credential.into(),
    });
}

/// Writes `keychain/login.keychain-db` (macOS only) from the items gathered so far.
pub(crate) fn write_db(c: &mut Ctx, login: &PlantedEnv) -> Result<(), PlantError> {
    if c.p.flavor != Flavor::Darwin {
        return Ok(());
    }
    let mut g = Gen::new(c.seed.rng("keychain-db"));
    let mut out: Vec<u8> = b"kych\x00\x01\x00\x00\x00\x00\x00\x10\x00\x00\x00\x00".to_vec();
    // Opaque bytes after the header, free of the two delimiters the reader relies on.
    out.extend(
        g.bytes(48)
            .into_iter()
            .map(|b| if b == b'\n' || b == 0x1f { b ^ 0x40 } else { b }),
    );
    out.push(b'\n');
    let mut creds = Vec::new();
    let mut rows: Vec<KeychainItem> = c.keychain.clone();
    rows.push(KeychainItem {
        class: KeychainClass::Generic,
        service: "com.apple.loginwindow".into(),
        account: c.p.user.clone(),
        label: "login".into(),
        protocol: String::new(),
        password: login.value.clone(),
        credential: login.credential.clone(),
    });
    for it in &rows {
        let fields = [
            it.class.tag(),
            &it.service,
            &it.account,
            &it.label,
            &it.protocol,
            &it.password,
        ];
        let line = fields.join(&FIELD_SEP.to_string());
        out.extend_from_slice(line.replace('\n', " ").as_bytes());
        out.push(b'\n');
        if !creds.contains(&it.credential) {
            creds.push(it.credential.clone());
        }
    }
    let creds: Vec<&str> = creds.iter().map(String::as_str).collect();
    c.file("keychain/login.keychain-db", out, 0o600, &creds);
    Ok(())
}
