//! The server's credential store (`spec.security.credentialStoreSecretName`, infinispan-
//! operator's field): every key of the user's Secret is an alias of the store `credentials`
//! holding its value as a clear-text credential, so that a configuration overlay refers to a
//! password with `<credential-reference store="credentials" alias="…"/>` instead of writing it.
//!
//! The store is a PKCS#12 file the Infinispan CLI writes (`credentials add`, the server's own
//! tool) in an init container of the server image, from the Secret mounted there only, into an
//! in-memory volume the server reads; its password is a random one in the operator's Secret
//! `<cluster>-credential-store`, given to both containers through the environment. The CLI
//! reads a batch file (its command-line arguments are re-split on white space), whose lines
//! take a value in single quotes, or in double quotes when it has a `'`; the parser knows no
//! escapes. Hence what [`check_value`] refuses, measured on 16.0.7's CLI: an empty value, a line
//! break or other control character, both kinds of quotes. The CLI also exits 0 when a line
//! fails, so the script counts the aliases the store lists afterwards.
//!
//! A change of the Secret's content rolls the pods ([`CredentialStore::digest`] is part of the
//! config hash); the values never reach a ConfigMap, an argument or a log.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use sha2::{Digest, Sha256};

/// The store's name in the server configuration.
pub const STORE_NAME: &str = "credentials";
/// Where the store's in-memory volume is mounted (both containers).
pub const STORE_DIR: &str = "/etc/infinispan/credential-store";
/// The store's file in [`STORE_DIR`].
pub const STORE_FILE: &str = "credentials.pfx";
/// Where the user's Secret is mounted (the init container only).
pub const SOURCE_DIR: &str = "/etc/infinispan/credential-store-source";
/// The variable with the store's password (both containers).
pub const PASSWORD_ENV: &str = "INFINISPAN_CREDENTIAL_STORE_PASSWORD";
/// The key of the store's password in the operator's Secret.
pub const PASSWORD_KEY: &str = "password";
/// The init container's name.
pub const INIT_CONTAINER_NAME: &str = "credential-store";

/// The operator's Secret with the store's password.
pub fn password_secret_name(cluster: &str) -> String {
    format!("{cluster}-credential-store")
}

/// The user's Secret, checked: its name, its aliases and a digest of its content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CredentialStore {
    pub secret: String,
    /// The Secret's keys, in order.
    pub aliases: Vec<String>,
    /// SHA-256 of the keys and values (a change rolls the pods; never the values themselves).
    pub digest: String,
}

/// A key or value of the Secret the store cannot take. Never holds a value.
#[derive(Debug, thiserror::Error)]
pub enum CredentialStoreError {
    #[error(
        "the Secret {secret:?} of spec.security.credentialStoreSecretName has no keys: each key is an alias of the server's credential store"
    )]
    Empty { secret: String },
    #[error(
        "key {key:?} of the Secret {secret:?} of spec.security.credentialStoreSecretName {problem}"
    )]
    Value {
        secret: String,
        key: String,
        problem: &'static str,
    },
    #[error(
        "keys {first:?} and {second:?} of the Secret {secret:?} of spec.security.credentialStoreSecretName are one alias: the server's credential store lower-cases aliases"
    )]
    SameAlias {
        secret: String,
        first: String,
        second: String,
    },
}

impl CredentialStore {
    /// Checks every key and value of `secret` (see the module documentation).
    pub fn from_secret(secret: &Secret) -> Result<Self, CredentialStoreError> {
        let name = secret.metadata.name.clone().unwrap_or_default();
        let mut values: BTreeMap<&str, &[u8]> = BTreeMap::new();
        for (key, value) in secret.data.iter().flatten() {
            values.insert(key, &value.0);
        }
        for (key, value) in secret.string_data.iter().flatten() {
            values.insert(key, value.as_bytes());
        }
        if values.is_empty() {
            return Err(CredentialStoreError::Empty { secret: name });
        }
        let mut lower: BTreeMap<String, &str> = BTreeMap::new();
        let mut hasher = Sha256::new();
        for (key, value) in &values {
            check_value(value).map_err(|problem| CredentialStoreError::Value {
                secret: name.clone(),
                key: key.to_string(),
                problem,
            })?;
            if let Some(first) = lower.insert(key.to_lowercase(), key) {
                return Err(CredentialStoreError::SameAlias {
                    secret: name,
                    first: first.to_string(),
                    second: key.to_string(),
                });
            }
            hasher.update((key.len() as u64).to_be_bytes());
            hasher.update(key.as_bytes());
            hasher.update((value.len() as u64).to_be_bytes());
            hasher.update(value);
        }
        Ok(Self {
            secret: name,
            aliases: values.keys().map(|key| key.to_string()).collect(),
            digest: format!("{:x}", hasher.finalize()),
        })
    }
}

/// Whether the CLI's batch can carry `value` unchanged (see the module documentation).
pub fn check_value(value: &[u8]) -> Result<(), &'static str> {
    let text = std::str::from_utf8(value).map_err(|_| "is not UTF-8 text")?;
    if text.is_empty() {
        return Err("is empty: the server's credential store has no empty credential");
    }
    if text.contains(['\n', '\r']) {
        return Err(
            "holds a line break (a value written by `echo` into a file ends with one): a credential is one line",
        );
    }
    if text.chars().any(char::is_control) {
        return Err("holds a control character");
    }
    if text.contains('\'') && text.contains('"') {
        return Err(
            "holds both ' and \": the Infinispan CLI that writes the store takes a value in one kind of quotes, without escapes",
        );
    }
    Ok(())
}

/// The init container's script: one `credentials add` line per file of [`SOURCE_DIR`] (the
/// value in the quotes it does not contain) in a batch file of the in-memory volume, run by
/// the server image's CLI, removed, then the store's aliases counted (the CLI exits 0 when a
/// line fails). `expected` is the number of keys the operator checked.
pub fn script(expected: usize) -> String {
    format!(
        r#"set -eu
umask 077
store={STORE_DIR}/{STORE_FILE}
work={STORE_DIR}/.work
rm -rf "$store" "$work"
mkdir -p "$work"
export HOME="$work"
for file in {SOURCE_DIR}/*; do
  alias=${{file##*/}}
  value=$(cat "$file")
  case $value in
    *\'*) quote='"' ;;
    *) quote="'" ;;
  esac
  printf 'credentials add %s --path=%s --password=%s --credential=%s%s%s\n' "$alias" "$store" "${PASSWORD_ENV}" "$quote" "$value" "$quote" >>"$work/batch"
done
cli() {{ java -Xmx160m -XX:-UsePerfData -Dfile.encoding=UTF-8 -Djava.io.tmpdir="$work" -cp '/opt/infinispan/lib/*' org.infinispan.cli.commands.CLI "$@"; }}
cli -f "$work/batch" >"$work/output" 2>&1 || true
rm -f "$work/batch"
listed=$(cli credentials ls --path="$store" --password="${PASSWORD_ENV}" 2>/dev/null | grep -c . || true)
if [ "$listed" != "{expected}" ]; then
  echo "the credential store has $listed of {expected} aliases; the Infinispan CLI said:"
  sed -e 's/\x1b\[[0-9;]*m//g' -e 's/--password=[^ ]*/--password=(not shown)/g' -e 's/--credential=.*/--credential=(not shown)/' "$work/output" | tail -n 20
  rm -rf "$work"
  exit 1
fi
rm -rf "$work"
echo "credential store: {expected} aliases"
"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    fn secret(data: &[(&str, &str)]) -> Secret {
        super::super::fixtures::secret("db", data)
    }

    #[test]
    fn every_key_is_an_alias_and_the_digest_follows_the_content_only() {
        let store = CredentialStore::from_secret(&secret(&[
            ("dbpassword", "s3cr et"),
            ("ldap.bind", "it's"),
        ]))
        .expect("valid");
        assert_eq!(store.secret, "db");
        assert_eq!(store.aliases, ["dbpassword", "ldap.bind"]);
        let same = CredentialStore::from_secret(&secret(&[
            ("ldap.bind", "it's"),
            ("dbpassword", "s3cr et"),
        ]))
        .expect("valid");
        assert_eq!(store.digest, same.digest);
        let changed = CredentialStore::from_secret(&secret(&[
            ("dbpassword", "s3cr et!"),
            ("ldap.bind", "it's"),
        ]))
        .expect("valid");
        assert_ne!(store.digest, changed.digest);
        // Keys and values are framed: moving a character from one to the other changes it.
        let shifted = CredentialStore::from_secret(&secret(&[("ab", "c")])).expect("valid");
        let other = CredentialStore::from_secret(&secret(&[("a", "bc")])).expect("valid");
        assert_ne!(shifted.digest, other.digest);
    }

    #[test]
    fn values_the_clis_batch_cannot_carry_are_refused_without_showing_them() {
        for (value, problem) in [
            ("", "is empty"),
            ("hunter2\n", "line break"),
            ("a\tb", "control character"),
            ("it's \"quoted\"", "both ' and \""),
        ] {
            let error = CredentialStore::from_secret(&secret(&[("pw", value)]))
                .expect_err(value)
                .to_string();
            assert!(error.contains(problem), "{value:?}: {error}");
            assert!(error.contains("key \"pw\""), "{error}");
            if !value.is_empty() {
                assert!(!error.contains(value), "the value is shown: {error}");
            }
        }
        let latin1 = Secret {
            data: Some(BTreeMap::from([("pw".to_string(), ByteString(vec![0xe9]))])),
            ..secret(&[])
        };
        assert!(
            CredentialStore::from_secret(&latin1)
                .expect_err("not UTF-8")
                .to_string()
                .contains("not UTF-8")
        );
    }

    #[test]
    fn an_empty_secret_and_keys_that_differ_only_in_case_are_refused() {
        assert!(matches!(
            CredentialStore::from_secret(&secret(&[])),
            Err(CredentialStoreError::Empty { .. })
        ));
        let error =
            CredentialStore::from_secret(&secret(&[("DbPassword", "a"), ("dbpassword", "b")]))
                .expect_err("one alias");
        assert!(error.to_string().contains("lower-cases"), "{error}");
    }

    #[test]
    fn the_script_never_puts_a_value_on_a_command_line_and_counts_the_aliases() {
        let script = script(3);
        assert!(script.contains(&format!("for file in {SOURCE_DIR}/*")));
        assert!(script.contains("cli -f \"$work/batch\""));
        assert!(script.contains("!= \"3\""));
        // The only command line with a credential is the batch's, written by printf.
        assert!(!script.contains("--credential=\"$value\""));
        assert!(script.contains("rm -f \"$work/batch\""));
    }
}
