//! Unpredictable tokens from the operating system's CSPRNG (`getrandom`): DIGEST client
//! nonces and multipart boundaries. A predictable cnonce helps an attacker who picks the
//! server's nonce precompute answers; a predictable boundary lets content that carries it
//! forge a part of the form.

use crate::error::Error;

/// 128 random bits as 32 lowercase hex digits.
pub(crate) fn token() -> Result<String, Error> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)
        .map_err(|e| Error::Config(format!("the operating system's random source failed: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_128_bits_of_hex_and_differ() -> Result<(), Error> {
        let (a, b) = (token()?, token()?);
        assert_eq!(a.len(), 32);
        assert!(
            a.chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        assert_ne!(a, b);
        Ok(())
    }
}
