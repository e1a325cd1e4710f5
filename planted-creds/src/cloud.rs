//! Cloud provider credentials: AWS, GCP, Azure CLI, Kubernetes, Docker.

use crate::der;
use crate::gen::{self, find_tell, Gen};
use crate::plant::{rsa_key, Ctx, PlantError};
use crate::registry::Part;
use crate::Seed;
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use rsa::pkcs8::{EncodePrivateKey, LineEnding};
use serde_json::json;

const AWS_HOSTS: &[&str] = &["*.amazonaws.com", "*.aws.amazon.com", "aws.amazon.com"];
const AZURE_CLI_APP: &str = "04b07795-8ddb-461a-bbee-02f9e1bf7b46";

fn enc_err(what: &'static str) -> impl Fn(serde_json::Error) -> PlantError {
    move |e| PlantError::Encode {
        what,
        msg: e.to_string(),
    }
}

pub(crate) fn slug(s: &str) -> String {
    s.to_ascii_lowercase()
        .chars()
        .map(|ch| if ch.is_ascii_alphanumeric() { ch } else { '-' })
        .collect::<String>()
        .split('-')
        .filter(|x| !x.is_empty())
        .collect::<Vec<_>>()
        .join("-")
}

/// Plants the cloud files; `gcp_pem` comes from [`gcp_key`], searched beforehand.
pub(crate) fn plant(c: &mut Ctx, gcp_pem: String) -> Result<(), PlantError> {
    aws(c);
    gcp(c, gcp_pem)?;
    azure(c)?;
    kube(c)?;
    docker(c);
    Ok(())
}

fn aws(c: &mut Ctx) {
    let mut g = c.gen("aws");
    let mut creds = String::new();
    for (id, profile) in [("aws-default", "default"), ("aws-prod", "prod")] {
        let key = gen::aws_key_id(&mut g);
        let secret = gen::aws_secret(&mut g);
        c.reg.credential(id, "aws-access-key", AWS_HOSTS);
        c.reg.value(id, &key);
        c.reg.value(id, &secret);
        creds.push_str(&format!(
            "[{profile}]\naws_access_key_id = {key}\naws_secret_access_key = {secret}\n\n"
        ));
        if profile == "default" {
            c.env("AWS_ACCESS_KEY_ID", &key, id);
            c.env("AWS_SECRET_ACCESS_KEY", &secret, id);
        }
    }
    let region = *g.pick(&["eu-west-1", "us-east-1", "us-west-2", "eu-central-1"]);
    c.file(
        "aws/credentials",
        creds.trim_end().to_string() + "\n",
        0o600,
        &["aws-default", "aws-prod"],
    );
    let config = format!(
        "[default]\nregion = {region}\noutput = json\n\n[profile prod]\nregion = us-east-1\noutput = json\n"
    );
    c.file("aws/config", config, 0o600, &[]);
}

/// The service account's PKCS#8 private key, from its own `gcp-key` stream.
pub(crate) fn gcp_key(seed: &Seed, probe: bool) -> Result<String, PlantError> {
    let mut g = Gen::new(seed.rng("gcp-key"));
    rsa_key(&mut g, probe, |k| {
        let pem = k
            .to_pkcs8_pem(LineEnding::LF)
            .map_err(|e| PlantError::Key(e.to_string()))?
            .to_string();
        Ok((pem.clone(), vec![pem]))
    })
}

fn gcp(c: &mut Ctx, pem: String) -> Result<(), PlantError> {
    let mut g = c.gen("gcp");
    let project = format!("{}-prod-{}", slug(&c.p.company), g.digits(6));
    let key_id = g.hex(40);
    let sa = *g.pick(&["deploy-bot", "ci-runner", "data-pipeline", "terraform"]);
    let email = format!("{sa}@{project}.iam.gserviceaccount.com");
    let v = json!({
        "type": "service_account",
        "project_id": project,
        "private_key_id": key_id,
        "private_key": pem,
        "client_email": email,
        "client_id": g.digits(21),
        "auth_uri": "https://accounts.google.com/o/oauth2/auth",
        "token_uri": "https://oauth2.googleapis.com/token",
        "auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
        "client_x509_cert_url": format!("https://www.googleapis.com/robot/v1/metadata/x509/{}", email.replace('@', "%40")),
        "universe_domain": "googleapis.com"
    });
    let id = "gcp-service-account";
    c.reg.credential(
        id,
        "gcp-service-account-key",
        &["*.googleapis.com", "accounts.google.com"],
    );
    c.reg.value(id, &pem);
    c.reg.value(id, &key_id);
    let text = serde_json::to_string_pretty(&v).map_err(enc_err("gcp key"))?;
    c.file("gcloud/service-account.json", text + "\n", 0o600, &[id]);
    Ok(())
}

fn azure(c: &mut Ctx) -> Result<(), PlantError> {
    let mut g = c.gen("azure");
    let tenant = g.uuid();
    let oid = g.uuid();
    let sub = g.uuid();
    let now = c.now - g.range(600, 3000);
    let home = format!("{oid}.{tenant}");
    let kid = g.b64url(20);
    let (sub1, sub2) = (g.b64url(32), g.b64url(32));
    let at = gen::jwt(
        &mut g,
        &json!({"typ": "JWT", "alg": "RS256", "x5t": kid, "kid": kid}),
        &json!({
            "aud": "https://management.core.windows.net/",
            "iss": format!("https://sts.windows.net/{tenant}/"),
            "iat": now, "nbf": now, "exp": now + 4437,
            "acr": "1", "amr": ["pwd", "mfa"], "appid": AZURE_CLI_APP, "appidacr": "0",
            "family_name": c.p.full_name.split(' ').next_back().unwrap_or_default(),
            "given_name": c.p.full_name.split(' ').next().unwrap_or_default(),
            "idtyp": "user", "name": c.p.full_name, "oid": oid,
            "scp": "user_impersonation", "sub": sub1, "tid": tenant,
            "unique_name": c.p.email, "upn": c.p.email, "ver": "1.0",
        }),
        "aio",
    );
    let idt = gen::jwt(
        &mut g,
        &json!({"typ": "JWT", "alg": "RS256", "kid": kid}),
        &json!({
            "aud": AZURE_CLI_APP,
            "iss": format!("https://login.microsoftonline.com/{tenant}/v2.0"),
            "iat": now, "nbf": now, "exp": now + 3600,
            "name": c.p.full_name, "oid": oid, "preferred_username": c.p.email,
            "sub": sub2, "tid": tenant, "ver": "2.0",
        }),
        "aio",
    );
    let rt = format!("1.AS{}.{}", g.b64url(30), g.b64url(560));
    let env = "login.microsoftonline.com";
    let target = "https://management.core.windows.net//user_impersonation https://management.core.windows.net//.default";
    let cache = json!({
        "AccessToken": {
            format!("{home}-{env}-accesstoken-{AZURE_CLI_APP}-{tenant}-{}", target.to_ascii_lowercase()): {
                "credential_type": "AccessToken", "secret": at, "home_account_id": home,
                "environment": env, "client_id": AZURE_CLI_APP, "target": target, "realm": tenant,
                "token_type": "Bearer", "cached_at": now.to_string(),
                "expires_on": (now + 4437).to_string(), "extended_expires_on": (now + 4437).to_string()
            }
        },
        "Account": {
            format!("{home}-{env}-{tenant}"): {
                "home_account_id": home, "environment": env, "realm": tenant,
                "local_account_id": oid, "username": c.p.email, "authority_type": "MSSTS"
            }
        },
        "IdToken": {
            format!("{home}-{env}-idtoken-{AZURE_CLI_APP}-{tenant}-"): {
                "credential_type": "IdToken", "secret": idt, "home_account_id": home,
                "environment": env, "realm": tenant, "client_id": AZURE_CLI_APP
            }
        },
        "RefreshToken": {
            format!("{home}-{env}-refreshtoken-1--"): {
                "credential_type": "RefreshToken", "secret": rt, "home_account_id": home,
                "environment": env, "client_id": AZURE_CLI_APP, "target": target,
                "last_modification_time": now.to_string(), "family_id": "1"
            }
        },
        "AppMetadata": {
            format!("appmetadata-{env}-{AZURE_CLI_APP}"): {
                "client_id": AZURE_CLI_APP, "environment": env, "family_id": "1"
            }
        }
    });
    let id = "azure-cli";
    c.reg.credential(
        id,
        "azure-oauth-token",
        &[
            "login.microsoftonline.com",
            "management.azure.com",
            "management.core.windows.net",
            "graph.microsoft.com",
        ],
    );
    c.reg.value(id, &at);
    c.reg.value(id, &rt);
    c.reg.value(id, &idt);
    let text = serde_json::to_string(&cache).map_err(enc_err("azure cache"))?;
    c.file("azure/msal_token_cache.json", text, 0o600, &[id]);
    let domain = format!("{}.onmicrosoft.com", slug(&c.p.company).replace('-', ""));
    let profile = json!({
        "installationId": g.uuid(),
        "subscriptions": [{
            "id": sub, "name": format!("{} Production", c.p.company), "state": "Enabled",
            "user": {"name": c.p.email, "type": "user"}, "isDefault": true,
            "tenantId": tenant, "environmentName": "AzureCloud", "homeTenantId": tenant,
            "tenantDefaultDomain": domain, "tenantDisplayName": c.p.company,
            "managedByTenants": []
        }]
    });
    // The Azure CLI writes this file with a byte-order mark.
    let mut bytes = "\u{feff}".as_bytes().to_vec();
    bytes.extend(
        serde_json::to_string_pretty(&profile)
            .map_err(enc_err("azure profile"))?
            .into_bytes(),
    );
    c.file("azure/azureProfile.json", bytes, 0o600, &[]);
    Ok(())
}

fn kube(c: &mut Ctx) -> Result<(), PlantError> {
    let mut g = c.gen("kube");
    let server = format!("k8s-prod.{}", c.p.company_domain);
    let ca_key = ed25519_dalek::SigningKey::from_bytes(&{
        let mut k = [0u8; 32];
        k.copy_from_slice(&g.bytes(32));
        k
    });
    let serial = g.bytes(16);
    let born = c.now - g.range(200 * 86400, 700 * 86400);
    let ca = der::ca_certificate(&ca_key, &serial, "kubernetes", born);
    let ca_b64 = STANDARD.encode(der::pem("CERTIFICATE", &ca));
    let ns = "platform";
    let sa = format!("{}-admin", c.p.user);
    let iat = c.now - g.range(86400, 40 * 86400);
    let sa_uid = g.uuid();
    let token = gen::jwt(
        &mut g,
        &json!({"alg": "RS256", "kid": gen_kid(&mut Gen::new(c.seed.rng("kube-kid")))}),
        &json!({
            "aud": ["https://kubernetes.default.svc.cluster.local"],
            "exp": iat + 365 * 86400, "iat": iat, "nbf": iat,
            "iss": "https://kubernetes.default.svc.cluster.local",
            "kubernetes.io": {"namespace": ns, "serviceaccount": {"name": sa, "uid": sa_uid}},
            "sub": format!("system:serviceaccount:{ns}:{sa}")
        }),
        "jti",
    );
    let cluster = "prod-eu";
    let config = format!(
        "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: {ca_b64}\n    server: https://{server}:6443\n  name: {cluster}\n\
         contexts:\n- context:\n    cluster: {cluster}\n    namespace: {ns}\n    user: {sa}\n  name: {cluster}\n\
         current-context: {cluster}\nkind: Config\npreferences: {{}}\nusers:\n- name: {sa}\n  user:\n    token: {token}\n"
    );
    let id = "kube-token";
    c.reg.credential(id, "kubernetes-token", &[server.as_str()]);
    c.reg.value(id, &token);
    c.file("kube/config", config, 0o600, &[id]);
    Ok(())
}

fn gen_kid(g: &mut Gen) -> String {
    g.b64url(32)
}

fn docker(c: &mut Ctx) {
    let mut g = c.gen("docker");
    let user = c.p.github_user.to_ascii_lowercase();
    let (pat, auth) = loop {
        let pat = gen::docker_pat(&mut g);
        let auth = STANDARD.encode(format!("{user}:{pat}"));
        if find_tell(auth.as_bytes()).is_none() {
            break (pat, auth);
        }
    };
    let id = "docker-hub";
    c.reg.credential(
        id,
        "docker-registry-token",
        &[
            "index.docker.io",
            "registry-1.docker.io",
            "auth.docker.io",
            "hub.docker.com",
        ],
    );
    c.reg.value(id, &pat);
    c.reg.value(id, &auth);
    c.reg
        .piece(id, format!("{user}:{pat}").as_bytes(), Part::Embedded);
    let cfg = format!(
        "{{\n\t\"auths\": {{\n\t\t\"https://index.docker.io/v1/\": {{\n\t\t\t\"auth\": \"{auth}\"\n\t\t}}\n\t}}\n}}"
    );
    c.file("docker/config.json", cfg, 0o600, &[id]);
}
