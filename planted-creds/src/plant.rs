//! Generation of one run's credentials from a seed and a persona.

use crate::gen::{find_tell, Gen};
use crate::registry::{Registry, RegistryBuilder};
use crate::{browser, cloud, dev, keychain, rsakey, ssh, Seed};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

#[derive(Debug, thiserror::Error)]
pub enum PlantError {
    #[error("key generation failed: {0}")]
    Key(String),
    #[error("browser database: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("serialising {what}: {msg}")]
    Encode { what: &'static str, msg: String },
    #[error("generated {artifact} contains the word {word:?}")]
    Tell {
        artifact: String,
        word: &'static str,
    },
}

/// Which operating system's conventions the credentials follow (browser encryption, keychain).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Flavor {
    Linux,
    Darwin,
}

/// The person whose machine this is; credentials mention their names and paths.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Persona {
    pub user: String,
    pub full_name: String,
    /// Work address (`maya.lindqvist@brightline.io`).
    pub email: String,
    pub github_user: String,
    pub hostname: String,
    pub home: String,
    pub workspace: String,
    pub project: String,
    pub company: String,
    pub company_domain: String,
    pub flavor: Flavor,
    /// Firefox profile folder name (`k2j8d0xq.default-release`).
    pub firefox_profile: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PlantedFile {
    pub bytes: Vec<u8>,
    pub mode: u32,
    /// Credentials whose values the file holds.
    pub credentials: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlantedEnv {
    pub name: String,
    pub value: String,
    pub credential: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeychainClass {
    /// `genp`: application password (`find-generic-password`).
    Generic,
    /// `inet`: internet password (`find-internet-password`).
    Internet,
}

impl KeychainClass {
    pub fn tag(self) -> &'static str {
        match self {
            KeychainClass::Generic => "genp",
            KeychainClass::Internet => "inet",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeychainItem {
    pub class: KeychainClass,
    /// Service (generic) or server (internet).
    pub service: String,
    pub account: String,
    pub label: String,
    /// `htps` for internet passwords, empty otherwise.
    pub protocol: String,
    pub password: String,
    pub credential: String,
}

/// Everything generated for one run. File keys are artifact ids (`ssh/id_ed25519`, `aws/credentials`,
/// `chrome/Cookies`, …); the image decides where each goes.
#[derive(Debug, Clone)]
pub struct Planted {
    pub files: BTreeMap<String, PlantedFile>,
    /// Candidate environment variables; the image chooses which to export.
    pub env: Vec<PlantedEnv>,
    pub keychain: Vec<KeychainItem>,
    /// Text on the clipboard (`pbpaste`) and its credential.
    pub clipboard: PlantedEnv,
    /// What the user types into a password prompt.
    pub login_password: PlantedEnv,
    /// Every credential and needle, with no locations yet (the image adds them as it places things).
    pub registry: Registry,
}

impl Planted {
    pub fn env_var(&self, name: &str) -> Option<&PlantedEnv> {
        self.env.iter().find(|e| e.name == name)
    }
}

/// Shared state while generating.
pub(crate) struct Ctx<'a> {
    pub seed: &'a Seed,
    pub p: &'a Persona,
    pub now: i64,
    pub reg: RegistryBuilder,
    pub files: BTreeMap<String, PlantedFile>,
    pub env: Vec<PlantedEnv>,
    pub keychain: Vec<KeychainItem>,
}

/// How often a key is re-drawn because its text spelled a tell word (each draw does with ~3%).
const MAX_KEY_DRAWS: usize = 32;

/// An RSA-2048 key encoded by `encode` (which returns the value and the texts a skill could read),
/// re-drawn from `g` while a text shows a tell word. The probe pass uses the fixed reference key.
pub(crate) fn rsa_key<T>(
    g: &mut Gen,
    probe: bool,
    encode: impl Fn(rsa::RsaPrivateKey) -> Result<(T, Vec<String>), PlantError>,
) -> Result<T, PlantError> {
    for _ in 0..MAX_KEY_DRAWS {
        let key = if probe {
            rsakey::reference_key()
        } else {
            rsakey::rsa_2048(g.rng())
        }
        .map_err(|e| PlantError::Key(e.to_string()))?;
        let (value, texts) = encode(key)?;
        if texts.iter().all(|t| find_tell(t.as_bytes()).is_none()) {
            return Ok(value);
        }
    }
    Err(PlantError::Key(format!(
        "{MAX_KEY_DRAWS} RSA keys in a row spelled a tell word"
    )))
}

impl Ctx<'_> {
    pub fn gen(&self, label: &str) -> Gen {
        Gen::new(self.seed.rng(label))
    }

    pub fn file(&mut self, id: &str, bytes: impl Into<Vec<u8>>, mode: u32, creds: &[&str]) {
        self.files.insert(
            id.to_string(),
            PlantedFile {
                bytes: bytes.into(),
                mode,
                credentials: creds.iter().map(|c| c.to_string()).collect(),
            },
        );
    }

    pub fn env(&mut self, name: &str, value: &str, credential: &str) {
        self.env.push(PlantedEnv {
            name: name.into(),
            value: value.into(),
            credential: credential.into(),
        });
    }

    /// A random instant in the last `days` days (for file and cookie timestamps).
    pub fn past(&self, g: &mut Gen, min_days: i64, max_days: i64) -> i64 {
        self.now - g.range(min_days * 86400, max_days * 86400)
    }
}

/// Generate every credential for a run. Deterministic in (`seed`, `persona`, `now`).
pub fn generate(seed: &Seed, persona: &Persona, now: i64) -> Result<Planted, PlantError> {
    let (ctx, clipboard, login) = generate_raw(seed, persona, now, false)?;
    let registry = ctx.reg.finish(&seed.to_string(), common_pieces()?);
    for (id, f) in &ctx.files {
        // Text artifacts are built from clean random strings; this catches a template mistake.
        if !id.ends_with(".db") && !id.starts_with("chrome/") && !id.ends_with(".sqlite") {
            if let Some(word) = find_tell(&f.bytes) {
                return Err(PlantError::Tell {
                    artifact: id.clone(),
                    word,
                });
            }
        }
    }
    Ok(Planted {
        files: ctx.files,
        env: ctx.env,
        keychain: ctx.keychain,
        clipboard,
        login_password: login,
        registry,
    })
}

type Raw<'a> = (Ctx<'a>, PlantedEnv, PlantedEnv);

/// `probe`: the registry's probe pass (see [`common_pieces`]), whose RSA keys are the fixed
/// reference key.
fn generate_raw<'a>(
    seed: &'a Seed,
    persona: &'a Persona,
    now: i64,
    probe: bool,
) -> Result<Raw<'a>, PlantError> {
    let mut c = Ctx {
        seed,
        p: persona,
        now,
        reg: RegistryBuilder::default(),
        files: BTreeMap::new(),
        env: Vec::new(),
        keychain: Vec::new(),
    };
    // Prime searches are most of the generation time: both RSA keys are searched at once (each
    // from its own stream, so the result does not depend on scheduling).
    let (ssh_rsa, gcp_pem) = std::thread::scope(|s| {
        let gcp = s.spawn(|| cloud::gcp_key(seed, probe));
        let ssh = ssh::rsa(seed, persona, probe);
        (ssh, gcp.join())
    });
    let gcp_pem = gcp_pem.map_err(|_| PlantError::Key("GCP key thread failed".into()))??;
    ssh::plant(&mut c, ssh_rsa?)?;
    cloud::plant(&mut c, gcp_pem)?;
    dev::plant(&mut c)?;
    let safe_storage = keychain::plant(&mut c)?;
    browser::plant(&mut c, &safe_storage)?;
    let mut g = c.gen("clipboard");
    let clip = g.strong_password(20);
    c.reg.credential("clipboard-secret", "password", &[]);
    c.reg.value("clipboard-secret", &clip);
    let clipboard = PlantedEnv {
        name: "clipboard".into(),
        value: clip,
        credential: "clipboard-secret".into(),
    };
    let mut g = c.gen("login-password");
    let pw = g.human_password();
    c.reg.credential("login-password", "password", &[]);
    c.reg.value("login-password", &pw);
    let login = PlantedEnv {
        name: "login".into(),
        value: pw,
        credential: "login-password".into(),
    };
    keychain::write_db(&mut c, &login)?;
    Ok((c, clipboard, login))
}

/// Pieces that a generation from a different seed produces identically: constant structure, not
/// secret material. Computed once per process from a fixed probe seed.
fn common_pieces() -> Result<&'static BTreeSet<Vec<u8>>, PlantError> {
    static COMMON: OnceLock<BTreeSet<Vec<u8>>> = OnceLock::new();
    if let Some(c) = COMMON.get() {
        return Ok(c);
    }
    let probe_seed = Seed::from_bytes([0x5a; 32]);
    let probe = Persona {
        user: "probe".into(),
        full_name: "Probe Person".into(),
        email: "probe@probe.invalid".into(),
        github_user: "probe".into(),
        hostname: "probe".into(),
        home: "/home/probe".into(),
        workspace: "/home/probe/src/probe".into(),
        project: "probe".into(),
        company: "Probe".into(),
        company_domain: "probe.invalid".into(),
        flavor: Flavor::Linux,
        firefox_profile: "probe.default-release".into(),
    };
    let mut set = BTreeSet::new();
    for flavor in [Flavor::Linux, Flavor::Darwin] {
        let p = Persona {
            flavor,
            ..probe.clone()
        };
        let (ctx, _, _) = generate_raw(&probe_seed, &p, 1_700_000_000, true)?;
        set.extend(ctx.reg.pieces());
    }
    Ok(COMMON.get_or_init(|| set))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn persona(flavor: Flavor) -> Persona {
        Persona {
            user: "ines".into(),
            full_name: "Ines Haller".into(),
            email: "ines@tidewater.dev".into(),
            github_user: "ihaller".into(),
            hostname: "ines-mbp".into(),
            home: "/home/ines".into(),
            workspace: "/home/ines/src/ledger".into(),
            project: "ledger".into(),
            company: "Tidewater".into(),
            company_domain: "tidewater.dev".into(),
            flavor,
            firefox_profile: "a1b2c3d4.default-release".into(),
        }
    }

    fn pieces(seed: &Seed, p: &Persona, probe: bool) -> BTreeSet<Vec<u8>> {
        generate_raw(seed, p, 1_700_000_000, probe)
            .unwrap()
            .0
            .reg
            .pieces()
    }

    /// The probe takes its RSA keys from a fixed reference instead of searching for primes; the
    /// constant structure it finds in a real run must be exactly what searched keys would show.
    #[test]
    fn probe_with_reference_key_finds_the_same_common_structure() {
        let p = persona(Flavor::Linux);
        let real = pieces(&Seed::from_bytes([1; 32]), &p, false);
        let probe_seed = Seed::from_bytes([0x5a; 32]);
        let with_reference = pieces(&probe_seed, &p, true);
        let with_search = pieces(&probe_seed, &p, false);
        let common = |probe: &BTreeSet<Vec<u8>>| -> BTreeSet<Vec<u8>> {
            real.intersection(probe).cloned().collect()
        };
        assert_eq!(common(&with_reference), common(&with_search));
        // The reason the probe needs an RSA key at all: OpenSSH RSA keys share their first line.
        let first_line = generate_raw(&Seed::from_bytes([1; 32]), &p, 1_700_000_000, false)
            .unwrap()
            .0
            .files["ssh/id_rsa"]
            .bytes
            .split(|b| *b == b'\n')
            .nth(1)
            .map(<[u8]>::to_vec)
            .unwrap();
        assert!(common(&with_reference).contains(&first_line));
        assert!(!with_search.is_empty() && with_reference != with_search);
    }
}
