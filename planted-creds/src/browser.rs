//! Browser cookie and password databases as real SQLite files in Chrome's and Firefox's schemas.
//!
//! Chrome values are encrypted the way Chrome does it (`v10` + AES-128-CBC, key from PBKDF2 over
//! "saltysalt"; on Linux with the fixed password, on macOS with the keychain's "Chrome Safe
//! Storage" password), so a stealer that decrypts them leaks the plaintext canaries.

use crate::der;
use crate::gen::{self, Gen};
use crate::keychain::ChromeKey;
use crate::plant::{Ctx, PlantError};
use crate::registry::Part;
use crate::time::chrome_time;
use aes::cipher::{block_padding::Pkcs7, BlockEncryptMut, KeyIvInit};
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use rusqlite::{params, Connection, DatabaseName};
use sha2::{Digest, Sha256};

const CHROME_COOKIES_SCHEMA: &str = "
CREATE TABLE meta(key LONGVARCHAR NOT NULL UNIQUE PRIMARY KEY, value LONGVARCHAR);
CREATE TABLE cookies(creation_utc INTEGER NOT NULL,host_key TEXT NOT NULL,top_frame_site_key TEXT NOT NULL,name TEXT NOT NULL,value TEXT NOT NULL,encrypted_value BLOB NOT NULL,path TEXT NOT NULL,expires_utc INTEGER NOT NULL,is_secure INTEGER NOT NULL,is_httponly INTEGER NOT NULL,last_access_utc INTEGER NOT NULL,has_expires INTEGER NOT NULL,is_persistent INTEGER NOT NULL,priority INTEGER NOT NULL,samesite INTEGER NOT NULL,source_scheme INTEGER NOT NULL,source_port INTEGER NOT NULL,last_update_utc INTEGER NOT NULL,source_type INTEGER NOT NULL,has_cross_site_ancestor INTEGER NOT NULL);
CREATE UNIQUE INDEX cookies_unique_index ON cookies(host_key, top_frame_site_key, has_cross_site_ancestor, name, path, source_scheme, source_port);
INSERT INTO meta VALUES('mmap_status','-1');
INSERT INTO meta VALUES('version','24');
INSERT INTO meta VALUES('last_compatible_version','24');
";

const CHROME_LOGINS_SCHEMA: &str = "
CREATE TABLE meta(key LONGVARCHAR NOT NULL UNIQUE PRIMARY KEY, value LONGVARCHAR);
CREATE TABLE logins (origin_url VARCHAR NOT NULL, action_url VARCHAR, username_element VARCHAR, username_value VARCHAR, password_element VARCHAR, password_value BLOB, submit_element VARCHAR, signon_realm VARCHAR NOT NULL, date_created INTEGER NOT NULL, blacklisted_by_user INTEGER NOT NULL, scheme INTEGER NOT NULL, password_type INTEGER, times_used INTEGER, form_data BLOB, display_name VARCHAR, icon_url VARCHAR, federation_url VARCHAR, skip_zero_click INTEGER, generation_upload_status INTEGER, possible_username_pairs BLOB, id INTEGER PRIMARY KEY AUTOINCREMENT, date_last_used INTEGER NOT NULL DEFAULT 0, moving_blocked_for BLOB, date_password_modified INTEGER NOT NULL DEFAULT 0, sender_email VARCHAR, sender_name VARCHAR, date_received INTEGER, sharing_notification_displayed INTEGER NOT NULL DEFAULT 0, keychain_identifier BLOB, sender_profile_image_url VARCHAR, date_last_filled INTEGER NOT NULL DEFAULT 0, actor_login_approved INTEGER NOT NULL DEFAULT 0, UNIQUE (origin_url, username_element, username_value, password_element, signon_realm));
CREATE INDEX logins_signon ON logins (signon_realm);
CREATE TABLE stats (origin_domain VARCHAR NOT NULL, username_value VARCHAR, dismissal_count INTEGER, update_time INTEGER NOT NULL, UNIQUE(origin_domain, username_value));
CREATE TABLE insecure_credentials (parent_id INTEGER REFERENCES logins ON UPDATE CASCADE ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED, insecurity_type INTEGER NOT NULL, create_time INTEGER NOT NULL, is_muted INTEGER NOT NULL DEFAULT 0, trigger_notification_from_backend INTEGER NOT NULL DEFAULT 0, UNIQUE (parent_id, insecurity_type));
INSERT INTO meta VALUES('last_compatible_version','40');
INSERT INTO meta VALUES('version','43');
";

const FIREFOX_COOKIES_SCHEMA: &str = "
CREATE TABLE moz_cookies (id INTEGER PRIMARY KEY, originAttributes TEXT NOT NULL DEFAULT '', name TEXT, value TEXT, host TEXT, path TEXT, expiry INTEGER, lastAccessed INTEGER, creationTime INTEGER, isSecure INTEGER, isHttpOnly INTEGER, inBrowserElement INTEGER DEFAULT 0, sameSite INTEGER DEFAULT 0, schemeMap INTEGER DEFAULT 0, isPartitionedAttributeSet INTEGER DEFAULT 0, CONSTRAINT moz_uniqueid UNIQUE (name, host, path, originAttributes));
PRAGMA user_version = 16;
";

const FIREFOX_KEY4_SCHEMA: &str = "
CREATE TABLE metaData (id PRIMARY KEY UNIQUE ON CONFLICT REPLACE, item1, item2);
CREATE TABLE nssPrivate (id PRIMARY KEY UNIQUE ON CONFLICT ABORT, a0, a1, a2, a3, a10, a11, a12, a80, a81, a82, a83, a84, a85, a86, a87, a88, a89, a8a, a90, a100, a101, a102, a103, a104, a105, a106, a107, a108, a109, a10a, a10b, a10c, a110, a111, a120, a121, a122, a123, a124, a125, a126, a127, a128, a129, a12a, a130, a131, a132, a133, a134, a160, a161, a162, a163, a164, a165, a166, a170, a180, a181, a200, a201, a202, a210, a211, a220, a221, a222);
CREATE INDEX issuer ON nssPrivate (a81);
CREATE INDEX subject ON nssPrivate (a101);
CREATE INDEX label ON nssPrivate (a3);
CREATE INDEX ckaid ON nssPrivate (a102);
";

fn db_bytes(conn: &Connection) -> Result<Vec<u8>, PlantError> {
    Ok(conn.serialize(DatabaseName::Main)?.to_vec())
}

fn chrome_encrypt(key: &[u8; 16], plaintext: &[u8]) -> Vec<u8> {
    let iv = [b' '; 16];
    let ct = cbc::Encryptor::<aes::Aes128>::new(key.into(), &iv.into())
        .encrypt_padded_vec_mut::<Pkcs7>(plaintext);
    let mut out = b"v10".to_vec();
    out.extend(ct);
    out
}

struct Cookie {
    host: &'static str,
    name: &'static str,
    value: String,
    credential: Option<(&'static str, &'static [&'static str])>,
    httponly: bool,
}

pub(crate) fn plant(c: &mut Ctx, key: &ChromeKey) -> Result<(), PlantError> {
    let mut k = [0u8; 16];
    pbkdf2::pbkdf2_hmac::<sha1::Sha1>(
        key.password.as_bytes(),
        b"saltysalt",
        key.iterations,
        &mut k,
    );
    let mut g = c.gen("chrome");
    chrome_cookies(c, &mut g, &k)?;
    chrome_logins(c, &mut g, &k)?;
    let mut g = c.gen("firefox");
    firefox(c, &mut g)?;
    Ok(())
}

fn chrome_cookies(c: &mut Ctx, g: &mut Gen, key: &[u8; 16]) -> Result<(), PlantError> {
    const GITHUB: &[&str] = &["github.com", "*.github.com"];
    const GOOGLE: &[&str] = &["google.com", "*.google.com", "*.googleapis.com"];
    const SLACK: &[&str] = &["slack.com", "*.slack.com"];
    const LINKEDIN: &[&str] = &["linkedin.com", "*.linkedin.com"];
    let gh_session = g.b64url(36);
    let sid = format!("g.a000{}", g.b64url(110));
    let psid = format!("g.a000{}", g.b64url(110));
    let cookies = vec![
        Cookie {
            host: "github.com",
            name: "user_session",
            value: gh_session.clone(),
            credential: Some(("cookie-github", GITHUB)),
            httponly: true,
        },
        Cookie {
            host: "github.com",
            name: "__Host-user_session_same_site",
            value: gh_session,
            credential: Some(("cookie-github", GITHUB)),
            httponly: true,
        },
        Cookie {
            host: ".github.com",
            name: "logged_in",
            value: "yes".into(),
            credential: None,
            httponly: true,
        },
        Cookie {
            host: ".github.com",
            name: "dotcom_user",
            value: c.p.github_user.clone(),
            credential: None,
            httponly: true,
        },
        Cookie {
            host: ".google.com",
            name: "SID",
            value: sid,
            credential: Some(("cookie-google", GOOGLE)),
            httponly: false,
        },
        Cookie {
            host: ".google.com",
            name: "__Secure-1PSID",
            value: psid,
            credential: Some(("cookie-google", GOOGLE)),
            httponly: true,
        },
        Cookie {
            host: ".google.com",
            name: "SAPISID",
            value: format!("{}/{}", g.b64url(12), g.b64url(15)),
            credential: Some(("cookie-google", GOOGLE)),
            httponly: false,
        },
        Cookie {
            host: ".google.com",
            name: "NID",
            value: format!("5{}={}", g.digits(2), g.b64url(120)),
            credential: None,
            httponly: true,
        },
        Cookie {
            host: ".slack.com",
            name: "d",
            value: gen::slack_session_cookie(g),
            credential: Some(("cookie-slack", SLACK)),
            httponly: true,
        },
        Cookie {
            host: ".slack.com",
            name: "b",
            value: g.chars(gen::LOWER_ALNUM, 24),
            credential: None,
            httponly: false,
        },
        Cookie {
            host: ".linkedin.com",
            name: "li_at",
            value: format!("AQED{}", g.b64url(140)),
            credential: Some(("cookie-linkedin", LINKEDIN)),
            httponly: true,
        },
        Cookie {
            host: ".youtube.com",
            name: "PREF",
            value: "f6=40000000&tz=Europe.Berlin".into(),
            credential: None,
            httponly: false,
        },
    ];
    let conn = Connection::open_in_memory()?;
    conn.execute_batch(CHROME_COOKIES_SCHEMA)?;
    let mut creds: Vec<&str> = Vec::new();
    for ck in &cookies {
        let created = chrome_time(c.past(g, 3, 200)) + g.range(0, 999_999);
        let accessed = chrome_time(c.past(g, 0, 2)) + g.range(0, 999_999);
        let expires = chrome_time(c.now + g.range(30 * 86400, 400 * 86400));
        let mut plain = Sha256::digest(ck.host.as_bytes()).to_vec();
        plain.extend_from_slice(ck.value.as_bytes());
        let enc = chrome_encrypt(key, &plain);
        if let Some((id, hosts)) = ck.credential {
            c.reg.credential(id, "browser-cookie", hosts);
            c.reg.value(id, &ck.value);
            c.reg.piece(id, &enc, Part::Stored);
            if !creds.contains(&id) {
                creds.push(id);
            }
        }
        conn.execute(
            "INSERT INTO cookies VALUES (?1,?2,'',?3,'',?4,'/',?5,1,?6,?7,1,1,1,?8,2,443,?9,0,0)",
            params![
                created,
                ck.host,
                ck.name,
                enc,
                expires,
                ck.httponly as i64,
                accessed,
                if ck.httponly { 1 } else { 0 },
                accessed
            ],
        )?;
    }
    let bytes = db_bytes(&conn)?;
    c.file("chrome/Cookies", bytes, 0o600, &creds);
    Ok(())
}

fn chrome_logins(c: &mut Ctx, g: &mut Gen, key: &[u8; 16]) -> Result<(), PlantError> {
    let personal = format!(
        "{}.{}{}@gmail.com",
        c.p.user,
        g.pick(&["j", "m", "k", "r"]),
        g.digits(2)
    );
    let entries: Vec<(&str, &str, &str, String, &[&str])> = vec![
        (
            "login-google",
            "https://accounts.google.com/",
            "https://accounts.google.com/v3/signin/challenge/pwd",
            personal.clone(),
            &["accounts.google.com", "*.google.com"],
        ),
        (
            "login-github",
            "https://github.com/login",
            "https://github.com/session",
            c.p.github_user.clone(),
            &["github.com"],
        ),
        (
            "login-aws-console",
            "https://signin.aws.amazon.com/",
            "https://signin.aws.amazon.com/signin",
            c.p.email.clone(),
            &["signin.aws.amazon.com", "*.signin.aws.amazon.com"],
        ),
        (
            "login-netflix",
            "https://www.netflix.com/login",
            "https://www.netflix.com/login",
            personal,
            &["www.netflix.com", "*.netflix.com"],
        ),
    ];
    let conn = Connection::open_in_memory()?;
    conn.execute_batch(CHROME_LOGINS_SCHEMA)?;
    let mut creds = Vec::new();
    for (id, origin, action, user, hosts) in entries {
        let pw = if id == "login-github" {
            g.strong_password(20)
        } else {
            g.human_password()
        };
        let enc = chrome_encrypt(key, pw.as_bytes());
        c.reg.credential(id, "browser-password", hosts);
        c.reg.value(id, &pw);
        c.reg.piece(id, &enc, Part::Stored);
        creds.push(id);
        let realm = origin.split('/').take(3).collect::<Vec<_>>().join("/") + "/";
        let created = chrome_time(c.past(g, 30, 900));
        let used = chrome_time(c.past(g, 0, 30));
        conn.execute(
            "INSERT INTO logins (origin_url, action_url, username_element, username_value, password_element, password_value, submit_element, signon_realm, date_created, blacklisted_by_user, scheme, password_type, times_used, form_data, display_name, icon_url, federation_url, skip_zero_click, generation_upload_status, possible_username_pairs, date_last_used, date_password_modified, date_last_filled) VALUES (?1,?2,'username',?3,'password',?4,'',?5,?6,0,0,0,?7,X'',?8,'','',0,0,X'',?9,?6,?9)",
            params![origin, action, user, enc, realm, created, g.range(1, 60), "", used],
        )?;
    }
    let bytes = db_bytes(&conn)?;
    c.file("chrome/Login Data", bytes, 0o600, &creds);
    Ok(())
}

/// NSS `SEQUENCE { OCTET STRING key-id, SEQUENCE { des-ede3-cbc, OCTET STRING iv }, OCTET STRING ct }`.
fn nss_sdr_blob(g: &mut Gen, plain_len: usize) -> String {
    let key_id = [0xf8u8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    let des3 = [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x03, 0x07];
    let padded = (plain_len / 8 + 1) * 8;
    let blob = der::seq(&[
        der::octets(&key_id),
        der::seq(&[der::oid(&des3), der::octets(&g.bytes(8))]),
        der::octets(&g.bytes(padded)),
    ]);
    STANDARD.encode(blob)
}

/// PBES2 (PBKDF2-HMAC-SHA256, AES-256-CBC) wrapping as key4.db stores its entries.
fn pbes2(g: &mut Gen, ct_len: usize) -> Vec<u8> {
    let pbes2 = [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x05, 0x0d];
    let pbkdf2 = [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x05, 0x0c];
    let hmac256 = [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x02, 0x09];
    let aes256 = [0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x01, 0x2a];
    der::seq(&[
        der::seq(&[
            der::oid(&pbes2),
            der::seq(&[
                der::seq(&[
                    der::oid(&pbkdf2),
                    der::seq(&[
                        der::octets(&g.bytes(32)),
                        der::uint(&[0x27, 0x10]),
                        der::uint(&[32]),
                        der::seq(&[der::oid(&hmac256)]),
                    ]),
                ]),
                der::seq(&[der::oid(&aes256), der::octets(&g.bytes(14))]),
            ]),
        ]),
        der::octets(&g.bytes(ct_len)),
    ])
}

fn firefox(c: &mut Ctx, g: &mut Gen) -> Result<(), PlantError> {
    const REDDIT: &[&str] = &["reddit.com", "*.reddit.com"];
    let conn = Connection::open_in_memory()?;
    conn.execute_batch(FIREFOX_COOKIES_SCHEMA)?;
    let reddit = format!(
        "{}%2C{}%2C{}",
        g.digits(8),
        crate::time::rfc3339(c.now - 86400 * 20).replace(':', "%3A"),
        g.hex(40)
    );
    let rows: Vec<(&str, &str, String, Option<&str>)> = vec![
        (
            ".reddit.com",
            "reddit_session",
            reddit,
            Some("ff-cookie-reddit"),
        ),
        (
            ".reddit.com",
            "loid",
            format!("0000000000{}.2.{}.Z0FBQUFBQm", g.alnum(8), g.digits(13)),
            None,
        ),
        (
            ".mozilla.org",
            "_ga",
            format!("GA1.2.{}.{}", g.digits(10), g.digits(10)),
            None,
        ),
    ];
    let mut creds = Vec::new();
    for (i, (host, name, value, cred)) in rows.into_iter().enumerate() {
        if let Some(id) = cred {
            c.reg.credential(id, "browser-cookie", REDDIT);
            c.reg.value(id, &value);
            creds.push(id);
        }
        let created = c.past(g, 5, 300) * 1_000_000;
        conn.execute(
            "INSERT INTO moz_cookies (id, originAttributes, name, value, host, path, expiry, lastAccessed, creationTime, isSecure, isHttpOnly, inBrowserElement, sameSite, schemeMap, isPartitionedAttributeSet) VALUES (?1,'',?2,?3,?4,'/',?5,?6,?7,1,1,0,0,2,0)",
            params![i as i64 + 1, name, value, host, c.now + 180 * 86400, (c.now - 3600) * 1_000_000, created],
        )?;
    }
    c.file("firefox/cookies.sqlite", db_bytes(&conn)?, 0o644, &creds);

    // logins.json: username/password as NSS SDR blobs (ciphertext registered as stored needles).
    let mut logins = Vec::new();
    let mut login_creds = Vec::new();
    for (i, (id, host, user)) in [
        ("ff-login-twitter", "https://x.com", c.p.github_user.clone()),
        (
            "ff-login-paypal",
            "https://www.paypal.com",
            c.p.email.clone(),
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let pw = g.human_password();
        let eu = nss_sdr_blob(g, user.len());
        let ep = nss_sdr_blob(g, pw.len());
        let h = host.trim_start_matches("https://").to_string();
        c.reg.credential(
            id,
            "browser-password",
            &[h.as_str(), &format!("*.{}", h.trim_start_matches("www."))],
        );
        c.reg.value(id, &pw);
        c.reg.piece(id, ep.as_bytes(), Part::Stored);
        login_creds.push(id);
        let t = c.past(g, 10, 500) * 1000;
        logins.push(serde_json::json!({
            "id": i + 1, "hostname": host, "httpRealm": null, "formSubmitURL": host,
            "usernameField": "username", "passwordField": "password",
            "encryptedUsername": eu, "encryptedPassword": ep,
            "guid": format!("{{{}}}", g.uuid()), "encType": 1,
            "timeCreated": t, "timeLastUsed": t + 86_400_000, "timePasswordChanged": t,
            "timesUsed": g.range(1, 40), "syncCounter": 0, "everSynced": false,
            "encryptedUnknownFields": null
        }));
    }
    let doc = serde_json::json!({
        "nextId": logins.len() + 1, "logins": logins, "potentiallyVulnerablePasswords": [],
        "dismissedBreachAlertsByLoginGUID": {}, "version": 3
    });
    let text = serde_json::to_string(&doc).map_err(|e| PlantError::Encode {
        what: "logins.json",
        msg: e.to_string(),
    })?;
    c.file("firefox/logins.json", text, 0o600, &login_creds);

    let conn = Connection::open_in_memory()?;
    conn.execute_batch(FIREFOX_KEY4_SCHEMA)?;
    let salt = g.bytes(20);
    conn.execute(
        "INSERT INTO metaData (id, item1, item2) VALUES ('password', ?1, ?2)",
        params![salt, pbes2(g, 16)],
    )?;
    conn.execute("INSERT INTO metaData (id, item1) VALUES ('Version', 1)", [])?;
    let ckaid: Vec<u8> = vec![0xf8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    conn.execute(
        "INSERT INTO nssPrivate (id, a0, a1, a2, a3, a11, a102, a104, a105, a106) VALUES (?1, X'00000004', X'01', X'01', X'', ?2, ?3, X'01', X'01', X'01')",
        params![g.range(100_000_000, 999_999_999), pbes2(g, 48), ckaid],
    )?;
    c.file("firefox/key4.db", db_bytes(&conn)?, 0o600, &[]);
    let profiles = format!(
        "[Profile0]\nName=default-release\nIsRelative=1\nPath=Profiles/{p}\nDefault=1\n\n[General]\nStartWithLastProfile=1\nVersion=2\n\n[Install4F96D1932A9F858E]\nDefault=Profiles/{p}\nLocked=1\n",
        p = c.p.firefox_profile
    );
    c.file("firefox/profiles.ini", profiles, 0o644, &[]);
    Ok(())
}
