//! The issued material checked by independent code: rustls' WebPKI verifier for the chain, the
//! names and the usages; the PKCS#12 reader for the stores.

use std::sync::Arc;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use rustls::client::danger::ServerCertVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};

use super::issue::{self, Ca};
use super::objects;
use super::{Lifetimes, Purpose};

fn ca() -> Ca {
    issue::new_ca(
        &objects::ca_subject("team-a", "demo"),
        Timestamp::now(),
        Lifetimes::default().ca,
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

fn verify(ca: &Ca, chain_pem: &str, name: &str, at: Timestamp) -> Result<(), rustls::Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(
            CertificateDer::from_pem_slice(ca.cert_pem.as_bytes())
                .unwrap_or_else(|e| panic!("{e}")),
        )
        .unwrap_or_else(|e| panic!("{e}"));
    let verifier =
        rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .unwrap_or_else(|e| panic!("{e}"));
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(chain_pem.as_bytes())
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("{e}"));
    let server_name = ServerName::try_from(name.to_string()).unwrap_or_else(|e| panic!("{e}"));
    let now = UnixTime::since_unix_epoch(std::time::Duration::from_secs(
        u64::try_from(at.as_second()).unwrap_or(0),
    ));
    verifier
        .verify_server_cert(&chain[0], &chain[1..], &server_name, &[], now)
        .map(|_| ())
}

#[test]
fn an_endpoint_certificate_verifies_against_the_cluster_ca_for_its_names_only() {
    let ca = ca();
    let names = vec![
        "demo.team-a.svc.cluster.local".to_string(),
        "*.demo-ping.team-a.svc.cluster.local".to_string(),
    ];
    let now = Timestamp::now();
    let issued = issue::issue(
        &ca,
        Purpose::Endpoint,
        &names,
        now,
        SignedDuration::from_hours(24),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(issued.not_before < now && issued.not_after > now);
    verify(&ca, &issued.cert_pem, "demo.team-a.svc.cluster.local", now)
        .unwrap_or_else(|e| panic!("{e}"));
    verify(
        &ca,
        &issued.cert_pem,
        "demo-0.demo-ping.team-a.svc.cluster.local",
        now,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(verify(&ca, &issued.cert_pem, "other.team-a.svc.cluster.local", now).is_err());
    // Expired after its lifetime.
    assert!(
        verify(
            &ca,
            &issued.cert_pem,
            "demo.team-a.svc.cluster.local",
            now + SignedDuration::from_hours(25)
        )
        .is_err()
    );
    // Another cluster's CA does not vouch for it.
    let other = issue::new_ca("other", now, SignedDuration::from_hours(24))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        verify(
            &other,
            &issued.cert_pem,
            "demo.team-a.svc.cluster.local",
            now
        )
        .is_err()
    );
}

#[test]
fn a_certificate_issued_later_from_the_stored_ca_key_still_chains_to_the_ca() {
    let ca = ca();
    // What the controller does on renewal: the CA read back from its Secret.
    let meta = Default::default();
    let secret = objects::ca_secret(meta, &ca);
    let read = objects::ca_from_secret(&secret, &ca.subject).unwrap_or_else(|| panic!("CA"));
    let names = vec!["demo.team-a.svc".to_string()];
    let issued = issue::issue(
        &read,
        Purpose::Endpoint,
        &names,
        Timestamp::now(),
        SignedDuration::from_hours(1),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    verify(&ca, &issued.cert_pem, "demo.team-a.svc", Timestamp::now())
        .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn the_transport_stores_hold_the_key_chain_and_the_trusted_ca() {
    let ca = ca();
    let names = vec!["*.demo-ping.team-a.svc.cluster.local".to_string()];
    let issued = issue::issue(
        &ca,
        Purpose::Transport,
        &names,
        Timestamp::now(),
        SignedDuration::from_hours(1),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let (keystore, truststore) =
        issue::transport_stores(&ca, &issued, "secret-pw").unwrap_or_else(|e| panic!("{e}"));
    let keys = p12_keystore::KeyStore::from_pkcs12(
        &keystore,
        "secret-pw",
        p12_keystore::Pkcs12ImportPolicy::Strict,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let (alias, chain) = keys
        .private_key_chain()
        .unwrap_or_else(|| panic!("a key entry"));
    assert_eq!(alias, "transport");
    assert_eq!(chain.certs().len(), 2);
    let trust = p12_keystore::KeyStore::from_pkcs12(
        &truststore,
        "secret-pw",
        p12_keystore::Pkcs12ImportPolicy::Strict,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    // Strict import keeps only certificates marked trusted (Java's trusted-certificate entry).
    assert!(matches!(
        trust.entry("ca"),
        Some(p12_keystore::KeyStoreEntry::Certificate(_))
    ));
    assert!(
        p12_keystore::KeyStore::from_pkcs12(
            &truststore,
            "wrong",
            p12_keystore::Pkcs12ImportPolicy::Strict
        )
        .is_err()
    );
}

#[test]
fn two_client_certificates_for_one_name_have_subjects_of_their_own_and_the_same_common_name() {
    // A server's truststore realm finds a listed certificate by its subject: the presented and
    // the next certificate of one identity must differ there, and keep the common name that
    // roles are mapped from.
    let ca = ca();
    let names = vec![objects::client_common_name("team-a", "demo")];
    let now = Timestamp::now();
    let subject = |issued: &issue::Issued| {
        let der = CertificateDer::from_pem_slice(issued.cert_pem.as_bytes())
            .unwrap_or_else(|e| panic!("{e}"));
        let (_, parsed) =
            x509_parser::parse_x509_certificate(&der).unwrap_or_else(|e| panic!("{e}"));
        let common_names: Vec<String> = parsed
            .subject()
            .iter_common_name()
            .filter_map(|cn| cn.as_str().ok().map(str::to_string))
            .collect();
        (parsed.subject().to_string(), common_names)
    };
    let issue = || {
        issue::issue(
            &ca,
            Purpose::Client,
            &names,
            now,
            Lifetimes::default().certificate,
        )
        .unwrap_or_else(|e| panic!("{e}"))
    };
    let (first, first_cn) = subject(&issue());
    let (second, second_cn) = subject(&issue());
    assert_ne!(first, second);
    assert_eq!(first_cn, ["infinispan-operator team-a/demo"]);
    assert_eq!(second_cn, first_cn);
}
