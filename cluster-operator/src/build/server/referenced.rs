//! The content the CR refers to, read by the controller and checked here: the realm's
//! [`Identities`] (operator credentials and application identities Secrets), the user's
//! [`ConfigOverlay`] (`spec.configMapName`) and the [`TlsCertificate`] (the TLS Secret).

use std::fmt;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::{
    ADMIN_ROLE, BuildError, IDENTITIES_KEY, PASSWORD_KEY, SECURITY_REALM, TLS_CERT_KEY,
    TLS_KEY_KEY, USERNAME_KEY,
};

/// One user of the server's realm. `Debug` never shows the password.
#[derive(Clone, PartialEq, Eq, Deserialize)]
pub struct User {
    pub username: String,
    pub password: String,
    /// Roles (the realm's groups); none means [`ADMIN_ROLE`].
    #[serde(default)]
    pub roles: Vec<String>,
}

impl fmt::Debug for User {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("User")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .field("roles", &self.roles)
            .finish()
    }
}

/// `identities.yaml`: the infinispan-operator format.
#[derive(Deserialize)]
struct IdentitiesYaml {
    #[serde(default)]
    credentials: Vec<User>,
}

/// The users of the server's realm: the operator user first (role [`ADMIN_ROLE`]), then the
/// application users, each checked (see [`Identities::new`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identities {
    users: Vec<User>,
}

impl Identities {
    /// The operator user `operator_username` (role [`ADMIN_ROLE`]) and the application `users`
    /// (those without roles get [`ADMIN_ROLE`]). Refused: an empty user name or password, one
    /// with a line break or another control character, one with leading or trailing white
    /// space (the server trims both), a role that is empty or holds a comma, white space or a
    /// control character, and a user name given twice.
    pub fn new(
        operator_username: &str,
        operator_password: &str,
        users: Vec<User>,
    ) -> Result<Self, BuildError> {
        let operator = User {
            username: operator_username.to_string(),
            password: operator_password.to_string(),
            roles: vec![ADMIN_ROLE.to_string()],
        };
        let mut checked: Vec<User> = Vec::with_capacity(users.len() + 1);
        for mut user in std::iter::once(operator).chain(users) {
            check_text(&user.username).map_err(|problem| BuildError::InvalidUser {
                username: user.username.clone(),
                problem: format!("the user name {problem}"),
            })?;
            check_text(&user.password).map_err(|problem| BuildError::InvalidUser {
                username: user.username.clone(),
                problem: format!("the password {problem}"),
            })?;
            for role in &user.roles {
                if role.is_empty()
                    || role
                        .chars()
                        .any(|c| c == ',' || c.is_whitespace() || c.is_control())
                {
                    return Err(BuildError::InvalidUser {
                        username: user.username.clone(),
                        problem: format!(
                            "the role {role:?} is empty or has a comma, white space or a control character"
                        ),
                    });
                }
            }
            if checked.iter().any(|other| other.username == user.username) {
                return Err(BuildError::DuplicateUser {
                    username: user.username,
                });
            }
            if user.roles.is_empty() {
                user.roles.push(ADMIN_ROLE.to_string());
            }
            checked.push(user);
        }
        Ok(Self { users: checked })
    }

    /// From the operator credentials Secret (keys [`USERNAME_KEY`] and [`PASSWORD_KEY`]) and the
    /// application identities Secret (key [`IDENTITIES_KEY`], `credentials:` a list of
    /// `username`, `password` and optional `roles`). Errors name the Secret and the key, never a
    /// password: a YAML error gives only its line and column.
    pub fn from_secrets(
        operator_credentials: &Secret,
        application_identities: &Secret,
    ) -> Result<Self, BuildError> {
        let username = secret_text(operator_credentials, USERNAME_KEY)?;
        let password = secret_text(operator_credentials, PASSWORD_KEY)?;
        let identities = secret_text(application_identities, IDENTITIES_KEY)?;
        let parsed: IdentitiesYaml =
            serde_saphyr::from_str(identities).map_err(|error| BuildError::InvalidIdentities {
                secret: secret_name(application_identities),
                position: error
                    .location()
                    .map(|at| format!(" at line {}, column {}", at.line(), at.column()))
                    .unwrap_or_default(),
            })?;
        Self::new(username, password, parsed.credentials)
    }

    /// These users and the metrics user of the Secret `credentials` (keys [`USERNAME_KEY`] and
    /// [`PASSWORD_KEY`]) with the role [`super::METRICS_ROLE`] only, checked like the others
    /// (an application user of the same name is refused).
    pub fn with_metrics_user(self, credentials: &Secret) -> Result<Self, BuildError> {
        let metrics = User {
            username: secret_text(credentials, USERNAME_KEY)?.to_string(),
            password: secret_text(credentials, PASSWORD_KEY)?.to_string(),
            roles: vec![super::METRICS_ROLE.to_string()],
        };
        let mut users = self.users;
        let operator = users.remove(0);
        users.push(metrics);
        Self::new(&operator.username, &operator.password, users)
    }

    /// The users, the operator first.
    pub fn users(&self) -> &[User] {
        &self.users
    }

    /// `users.properties`: one `user=password` line each, clear text, escaped for the server's
    /// reader (a backslash before `\`, `=`, `:`, `#`, `!` and spaces).
    pub fn users_properties(&self) -> String {
        let mut out = String::from(
            "# Generated by the Infinispan cluster operator from the operator credentials and \
             application identities Secrets.\n",
        );
        out.push_str(&format!(
            "#$REALM_NAME={SECURITY_REALM}$\n#$ALGORITHM=clear$\n"
        ));
        for user in &self.users {
            out.push_str(&format!(
                "{}={}\n",
                escape_property(&user.username),
                escape_property(&user.password)
            ));
        }
        out
    }

    /// `groups.properties`: one `user=role,role` line each.
    pub fn groups_properties(&self) -> String {
        let mut out = String::from("# Generated by the Infinispan cluster operator.\n");
        for user in &self.users {
            out.push_str(&format!(
                "{}={}\n",
                escape_property(&user.username),
                user.roles.join(",")
            ));
        }
        out
    }
}

/// A user name or password the realm files can carry unchanged.
fn check_text(text: &str) -> Result<(), &'static str> {
    if text.is_empty() {
        Err("is empty")
    } else if text.chars().any(char::is_control) {
        Err("has a line break or another control character")
    } else if text.trim() != text {
        Err("starts or ends with white space, which the server trims")
    } else {
        Ok(())
    }
}

/// Escapes a key or value of the realm's properties files: the server's users reader and
/// `java.util.Properties` both take `\x` as `x` for these characters; every other character
/// (non-ASCII included, the files are read as UTF-8) is written as is.
fn escape_property(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '\\' | '=' | ':' | '#' | '!' | ' ') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Format of the user's overlay, from its key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OverlayFormat {
    Xml,
    Yaml,
    Json,
}

/// Keys of an overlay ConfigMap, one of which it must hold.
pub const OVERLAY_KEYS: [(&str, OverlayFormat); 4] = [
    ("infinispan-config.xml", OverlayFormat::Xml),
    ("infinispan-config.yaml", OverlayFormat::Yaml),
    ("infinispan-config.yml", OverlayFormat::Yaml),
    ("infinispan-config.json", OverlayFormat::Json),
];

/// The user's server configuration overlay (`spec.configMapName`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigOverlay {
    key: &'static str,
    format: OverlayFormat,
    content: String,
}

impl ConfigOverlay {
    /// The overlay held under `key` (one of [`OVERLAY_KEYS`]).
    pub fn new(key: &str, content: impl Into<String>) -> Result<Self, BuildError> {
        let (key, format) = OVERLAY_KEYS
            .into_iter()
            .find(|(known, _)| *known == key)
            .ok_or_else(|| BuildError::InvalidOverlay {
                config_map: String::new(),
                problem: format!("{key:?} is not one of {}", overlay_key_list()),
            })?;
        let content = content.into();
        if content.trim().is_empty() {
            return Err(BuildError::InvalidOverlay {
                config_map: String::new(),
                problem: format!("{key} is empty"),
            });
        }
        Ok(Self {
            key,
            format,
            content,
        })
    }

    /// The overlay of a ConfigMap holding exactly one of [`OVERLAY_KEYS`] in `data`.
    pub fn from_config_map(config_map: &ConfigMap) -> Result<Self, BuildError> {
        let name = config_map.metadata.name.clone().unwrap_or_default();
        let invalid = |problem: String| BuildError::InvalidOverlay {
            config_map: name.clone(),
            problem,
        };
        let data = config_map.data.clone().unwrap_or_default();
        let present: Vec<(&str, &String)> = OVERLAY_KEYS
            .iter()
            .filter_map(|(key, _)| data.get(*key).map(|content| (*key, content)))
            .collect();
        match present.as_slice() {
            [(key, content)] => Self::new(key, content.as_str()).map_err(|error| match error {
                BuildError::InvalidOverlay { problem, .. } => invalid(problem),
                other => other,
            }),
            [] => Err(invalid(format!("it holds none of {}", overlay_key_list()))),
            several => Err(invalid(format!(
                "it holds {} overlays ({}); keep one",
                several.len(),
                several
                    .iter()
                    .map(|(key, _)| *key)
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        }
    }

    /// The key (file name) of the overlay.
    pub fn key(&self) -> &'static str {
        self.key
    }

    pub fn format(&self) -> OverlayFormat {
        self.format
    }

    pub fn content(&self) -> &str {
        &self.content
    }
}

fn overlay_key_list() -> String {
    OVERLAY_KEYS
        .iter()
        .map(|(key, _)| *key)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The user's TLS Secret, checked; only a digest of its key and certificate is kept (it rolls
/// the pods when the certificate changes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsCertificate {
    digest: String,
    /// The Secret has a `ca.crt` (the CA clients should trust).
    has_ca: bool,
    /// `Some`: a PKCS#12 keystore (`keystore.p12`, `password`), with the alias of the server's
    /// entry when the Secret names one (`alias`; empty: the keystore's only entry).
    pkcs12_alias: Option<String>,
}

impl TlsCertificate {
    /// A `kubernetes.io/tls`-shaped Secret: `tls.key` an unencrypted PEM private key (the
    /// server's PEM keystore has an empty password), `tls.crt` a PEM certificate chain; or
    /// infinispan-operator's PKCS#12 form: `keystore.p12`, its `password` and maybe the `alias`
    /// of the server's entry.
    pub fn from_secret(secret: &Secret) -> Result<Self, BuildError> {
        let has_p12 = secret
            .data
            .as_ref()
            .is_some_and(|data| data.contains_key(super::KEYSTORE_P12_KEY));
        if has_p12 {
            return Self::pkcs12(secret);
        }
        let name = secret_name(secret);
        let key = secret_text(secret, TLS_KEY_KEY)?;
        let cert = secret_text(secret, TLS_CERT_KEY)?;
        let invalid = |problem: &str| BuildError::InvalidTlsSecret {
            secret: name.clone(),
            problem: problem.to_string(),
        };
        if key.contains("ENCRYPTED PRIVATE KEY") || key.contains("Proc-Type: 4,ENCRYPTED") {
            return Err(invalid(
                "tls.key is encrypted; the server's PEM keystore needs an unencrypted key",
            ));
        }
        if !(key.contains("-----BEGIN ") && key.contains("PRIVATE KEY-----")) {
            return Err(invalid("tls.key holds no PEM private key"));
        }
        if !cert.contains("-----BEGIN CERTIFICATE-----") {
            return Err(invalid("tls.crt holds no PEM certificate"));
        }
        let mut hasher = Sha256::new();
        for part in [key, cert] {
            hash_part(&mut hasher, part);
        }
        Ok(Self {
            digest: format!("{:x}", hasher.finalize()),
            has_ca: has_ca(secret),
            pkcs12_alias: None,
        })
    }

    /// infinispan-operator's PKCS#12 form: `keystore.p12` (a PKCS#12 file, read by the server
    /// itself), its `password` (non-empty: the server opens the keystore with it) and maybe the
    /// `alias` of the server's entry.
    fn pkcs12(secret: &Secret) -> Result<Self, BuildError> {
        let name = secret_name(secret);
        let invalid = |problem: &str| BuildError::InvalidTlsSecret {
            secret: name.clone(),
            problem: problem.to_string(),
        };
        let data = secret.data.as_ref();
        let bytes = |key: &str| data.and_then(|d| d.get(key)).map(|b| b.0.as_slice());
        let keystore = bytes(super::KEYSTORE_P12_KEY).unwrap_or_default();
        // A PKCS#12 file is a DER SEQUENCE.
        if keystore.first() != Some(&0x30) {
            return Err(invalid("keystore.p12 is not a PKCS#12 file"));
        }
        let password = secret_text(secret, super::KEYSTORE_PASSWORD_KEY)?;
        let alias = match bytes(super::KEYSTORE_ALIAS_KEY) {
            None => String::new(),
            Some(alias) => std::str::from_utf8(alias)
                .map_err(|_| invalid("alias is not UTF-8"))?
                .trim()
                .to_string(),
        };
        if alias.contains(['"', '<', '>', '&']) {
            return Err(invalid("alias holds a character XML would need escaped"));
        }
        let mut hasher = Sha256::new();
        hasher.update((keystore.len() as u64).to_be_bytes());
        hasher.update(keystore);
        for part in [password, alias.as_str()] {
            hash_part(&mut hasher, part);
        }
        Ok(Self {
            digest: format!("{:x}", hasher.finalize()),
            has_ca: has_ca(secret),
            pkcs12_alias: Some(alias),
        })
    }

    /// `Some`: a PKCS#12 keystore, with its alias (empty: none given).
    pub fn pkcs12_alias(&self) -> Option<&str> {
        self.pkcs12_alias.as_deref()
    }

    /// SHA-256 (hex) of the key and the certificate.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// Whether the Secret has a `ca.crt`.
    pub fn has_ca(&self) -> bool {
        self.has_ca
    }
}

fn has_ca(secret: &Secret) -> bool {
    secret
        .data
        .as_ref()
        .is_some_and(|data| data.contains_key(crate::certificates::objects::CA_CERT_KEY))
}

/// Adds `part` to `hasher`, length-prefixed (so that parts cannot run into each other).
pub(super) fn hash_part(hasher: &mut Sha256, part: &str) {
    hasher.update((part.len() as u64).to_be_bytes());
    hasher.update(part.as_bytes());
}

fn secret_name(secret: &Secret) -> String {
    secret.metadata.name.clone().unwrap_or_default()
}

/// The UTF-8 text under `key` of `secret`'s data, non-empty.
fn secret_text<'a>(secret: &'a Secret, key: &str) -> Result<&'a str, BuildError> {
    let problem = |problem: &'static str| BuildError::SecretKey {
        secret: secret_name(secret),
        key: key.to_string(),
        problem,
    };
    let bytes = secret
        .data
        .as_ref()
        .and_then(|data| data.get(key))
        .ok_or_else(|| problem("is missing"))?;
    let text = std::str::from_utf8(&bytes.0).map_err(|_| problem("is not UTF-8"))?;
    if text.trim().is_empty() {
        return Err(problem("is empty"));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::*;
    use k8s_openapi::ByteString;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use std::collections::BTreeMap;

    #[test]
    fn escaped_properties_read_back_as_written() {
        // The server's users reader: `\x` is `x` (`\uXXXX` aside); the first unescaped `=` or
        // `:` ends the name; both sides are trimmed.
        fn read(line: &str) -> (String, String) {
            let mut name = None;
            let mut current = String::new();
            let mut chars = line.trim().chars();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => current.extend(chars.next()),
                    '=' | ':' if name.is_none() => name = Some(std::mem::take(&mut current)),
                    c => current.push(c),
                }
            }
            (
                name.unwrap_or_default().trim().to_string(),
                current.trim().to_string(),
            )
        }
        for (user, password) in [
            ("plain", "simple"),
            ("a:b=c", r"p=a:s\s#w!o rd"),
            ("#hash", "!bang"),
            ("ünï", "päss wörd"),
            ("back\\slash", "uABCD\\u0041"),
        ] {
            let line = format!("{}={}", escape_property(user), escape_property(password));
            assert_eq!(
                read(&line),
                (user.to_string(), password.to_string()),
                "{line}"
            );
            assert!(!line.starts_with('#') && !line.starts_with('!'), "{line}");
        }
    }

    #[test]
    fn bad_identities_are_refused_without_showing_a_password() {
        let check = |yaml: &str| {
            Identities::from_secrets(&operator_secret(), &identities_yaml(yaml))
                .map(|_| ())
                .map_err(|e| (e.reason(), e.to_string()))
        };
        assert!(check("credentials: []\n").is_ok());
        for (yaml, expected) in [
            (
                "credentials:\n- username: x\n  password: \"secret\\n2\"\n",
                "line break",
            ),
            (
                "credentials:\n- username: ' x'\n  password: secret3\n",
                "white space",
            ),
            ("credentials:\n- username: x\n  password: ''\n", "empty"),
            (
                "credentials:\n- username: x\n  password: secret4\n  roles: ['a,b']\n",
                "comma",
            ),
            (
                "credentials:\n- username: operator\n  password: secret5\n",
                "defined twice",
            ),
            (
                "credentials:\n- username: x\n  password: s1\n- username: x\n  password: s2\n",
                "defined twice",
            ),
            ("credentials: [{username: x, password: secret6", "line"),
            ("- username: x\n  password: secret7\n", "credentials"),
        ] {
            let (reason, message) = check(yaml).err().unwrap_or_else(|| panic!("{yaml} passed"));
            assert_eq!(reason, "InvalidIdentities", "{message}");
            assert!(message.contains(expected), "{yaml}: {message}");
            assert!(!message.contains("secret"), "{message} shows a password");
        }
        let no_key = Identities::from_secrets(&operator_secret(), &secret("ids", &[]));
        assert!(
            matches!(&no_key, Err(BuildError::SecretKey { key, problem: "is missing", .. }) if key == IDENTITIES_KEY),
            "{no_key:?}"
        );
        let not_utf8 = Secret {
            data: Some(BTreeMap::from([
                (USERNAME_KEY.to_string(), ByteString(b"op".to_vec())),
                (PASSWORD_KEY.to_string(), ByteString(vec![0xff, 0xfe])),
            ])),
            ..Secret::default()
        };
        assert!(matches!(
            Identities::from_secrets(&not_utf8, &identities_yaml("credentials: []")),
            Err(BuildError::SecretKey {
                problem: "is not UTF-8",
                ..
            })
        ));
        // Debug never shows a password either.
        let debug = format!("{:?}", identities());
        assert!(
            !debug.contains("Op3rator-pw") && !debug.contains("r3ader"),
            "{debug}"
        );
    }

    #[test]
    fn bad_tls_secrets_are_refused() {
        for (key, cert, expected) in [
            (
                KEY_PEM,
                "not a certificate",
                "tls.crt holds no PEM certificate",
            ),
            ("garbage", CERT_PEM, "tls.key holds no PEM private key"),
            (
                "-----BEGIN ENCRYPTED PRIVATE KEY-----\nx\n-----END ENCRYPTED PRIVATE KEY-----\n",
                CERT_PEM,
                "encrypted",
            ),
        ] {
            let error = TlsCertificate::from_secret(&secret(
                "demo-tls",
                &[(TLS_KEY_KEY, key), (TLS_CERT_KEY, cert)],
            ))
            .err()
            .unwrap_or_else(|| panic!("{expected}: accepted"));
            assert_eq!(error.reason(), "InvalidTlsSecret");
            assert!(error.to_string().contains(expected), "{error}");
        }
    }

    #[test]
    fn an_overlay_config_map_holds_exactly_one_overlay() {
        let config_map = |data: &[(&str, &str)]| ConfigMap {
            metadata: ObjectMeta {
                name: Some("demo-overlay".to_string()),
                ..ObjectMeta::default()
            },
            data: Some(
                data.iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..ConfigMap::default()
        };
        let read = ConfigOverlay::from_config_map(&config_map(&[
            ("infinispan-config.xml", "<infinispan/>"),
            ("README", "ignored"),
        ]))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read.key(), "infinispan-config.xml");
        assert_eq!(read.format(), OverlayFormat::Xml);
        for (data, expected) in [
            (vec![("other.xml", "<infinispan/>")], "holds none of"),
            (
                vec![
                    ("infinispan-config.xml", "<a/>"),
                    ("infinispan-config.json", "{}"),
                ],
                "2 overlays",
            ),
            (vec![("infinispan-config.json", "  ")], "is empty"),
        ] {
            let error = ConfigOverlay::from_config_map(&config_map(&data))
                .err()
                .unwrap_or_else(|| panic!("{expected}: accepted"));
            assert_eq!(error.reason(), "InvalidConfigOverlay");
            let message = error.to_string();
            assert!(message.contains("demo-overlay"), "{message}");
            assert!(message.contains(expected), "{message}");
        }
    }
}
