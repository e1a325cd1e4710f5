//! SSH keys in OpenSSH format, their public halves, `known_hosts` and `config`.

use crate::gen::{find_tell, Gen};
use crate::plant::{rsa_key, Ctx, Flavor, Persona, PlantError};
use crate::registry::Part;
use crate::Seed;
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, Mac};
use ssh_key::private::{KeypairData, RsaKeypair};
use ssh_key::{Algorithm, LineEnding, PrivateKey};

// Public host keys of real code hosts, as every developer's known_hosts carries them.
const GITHUB_ED25519: &str = "AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl";
const GITLAB_ED25519: &str = "AAAAC3NzaC1lZDI1NTE5AAAAIAfuCHKVTjquxvt6CM6tdG4SLp1Btn/nOeHHE5UOzRdf";

fn key_err(e: impl std::fmt::Display) -> PlantError {
    PlantError::Key(e.to_string())
}

/// Keys are re-drawn while their text contains a tell word (about 3% of RSA keys would).
fn ed25519(g: &mut Gen, comment: &str) -> Result<(String, String), PlantError> {
    loop {
        let mut k = PrivateKey::random(g.rng(), Algorithm::Ed25519).map_err(key_err)?;
        k.set_comment(comment);
        let text = k.to_openssh(LineEnding::LF).map_err(key_err)?.to_string();
        let public = k.public_key().to_openssh().map_err(key_err)?;
        if find_tell(text.as_bytes()).is_none() && find_tell(public.as_bytes()).is_none() {
            return Ok((text, public));
        }
    }
}

/// The user's RSA key pair (`id_rsa`, `id_rsa.pub` text), from the `ssh-rsa` stream.
pub(crate) fn rsa(seed: &Seed, p: &Persona, probe: bool) -> Result<(String, String), PlantError> {
    let mut g = Gen::new(seed.rng("ssh-rsa"));
    let comment = format!("{}@{}", p.user, p.hostname);
    rsa_key(&mut g, probe, |key| {
        let kp = RsaKeypair::try_from(key).map_err(key_err)?;
        let k = PrivateKey::new(KeypairData::Rsa(kp), &comment).map_err(key_err)?;
        let text = k.to_openssh(LineEnding::LF).map_err(key_err)?.to_string();
        let public = k.public_key().to_openssh().map_err(key_err)?;
        Ok(((text.clone(), public.clone()), vec![text, public]))
    })
}

/// `|1|salt|hmac` as `HashKnownHosts yes` writes it.
fn hashed_host(g: &mut Gen, host: &str) -> String {
    loop {
        let salt = g.bytes(20);
        let Ok(mut mac) = Hmac::<sha1::Sha1>::new_from_slice(&salt) else {
            continue;
        };
        mac.update(host.as_bytes());
        let line = format!(
            "|1|{}|{}",
            STANDARD.encode(&salt),
            STANDARD.encode(mac.finalize().into_bytes())
        );
        if find_tell(line.as_bytes()).is_none() {
            return line;
        }
    }
}

/// Plants the SSH files; `(rsa_priv, rsa_pub)` comes from [`rsa`], searched beforehand.
pub(crate) fn plant(c: &mut Ctx, (rsa_priv, rsa_pub): (String, String)) -> Result<(), PlantError> {
    let p = c.p.clone();
    let bastion = format!("bastion.{}", p.company_domain);
    let legacy = format!("build01.{}", p.company_domain);
    let mut g = c.gen("ssh-ed25519");
    let (ed_priv, ed_pub) = ed25519(&mut g, &p.email)?;

    let code_hosts = [
        "github.com",
        "gitlab.com",
        bastion.as_str(),
        legacy.as_str(),
    ];
    for (id, text, public) in [
        ("ssh-ed25519-key", &ed_priv, &ed_pub),
        ("ssh-rsa-key", &rsa_priv, &rsa_pub),
    ] {
        c.reg.credential(id, "ssh-private-key", &code_hosts);
        c.reg.value(id, text);
        c.reg.piece(id, public.as_bytes(), Part::Public);
        if let Some(blob) = public.split_whitespace().nth(1) {
            c.reg.piece(id, blob.as_bytes(), Part::Public);
        }
    }
    c.file("ssh/id_ed25519", ed_priv, 0o600, &["ssh-ed25519-key"]);
    c.file("ssh/id_ed25519.pub", format!("{ed_pub}\n"), 0o644, &[]);
    c.file("ssh/id_rsa", rsa_priv, 0o600, &["ssh-rsa-key"]);
    c.file("ssh/id_rsa.pub", format!("{rsa_pub}\n"), 0o644, &[]);

    // Host keys of the company's own machines.
    let mut g = c.gen("ssh-host-keys");
    let mut known = String::new();
    let hashed = p.flavor == Flavor::Linux;
    let mut entry = |g: &mut Gen, host: &str, key: &str| {
        let h = if hashed {
            hashed_host(g, host)
        } else {
            host.to_string()
        };
        known.push_str(&format!("{h} ssh-ed25519 {key}\n"));
    };
    entry(&mut g, "github.com", GITHUB_ED25519);
    entry(&mut g, "gitlab.com", GITLAB_ED25519);
    for host in [&bastion, &legacy] {
        let (_, host_pub) = ed25519(&mut g, "")?;
        let blob = host_pub
            .split_whitespace()
            .nth(1)
            .unwrap_or_default()
            .to_string();
        entry(&mut g, host, &blob);
    }
    c.file("ssh/known_hosts", known, 0o644, &[]);

    let config = format!(
        "Host github.com\n  User git\n  IdentityFile ~/.ssh/id_ed25519\n  IdentitiesOnly yes\n\n\
         Host bastion\n  HostName {bastion}\n  User {user}\n  IdentityFile ~/.ssh/id_ed25519\n  ForwardAgent no\n\n\
         Host build01\n  HostName {legacy}\n  User deploy\n  IdentityFile ~/.ssh/id_rsa\n  ProxyJump bastion\n\n\
         Host *\n  ServerAliveInterval 60\n{mac}",
        user = p.user,
        mac = if p.flavor == Flavor::Darwin {
            "  AddKeysToAgent yes\n  UseKeychain yes\n"
        } else {
            ""
        }
    );
    c.file("ssh/config", config, 0o644, &[]);
    Ok(())
}
