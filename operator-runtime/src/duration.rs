//! Durations on the command line (lease timings, intervals, timeouts).

use std::time::Duration;

/// A duration: seconds (`15`, `1.5`), or numbers with units `ms`, `s`, `m`, `h`, which may be
/// combined (`1m30s`). A clap `value_parser`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let invalid = || format!("invalid duration {text:?}: use e.g. 15, 15s, 500ms, 1m30s");
    if text.is_empty() {
        return Err(invalid());
    }
    if let Ok(seconds) = text.parse::<f64>() {
        return Duration::try_from_secs_f64(seconds).map_err(|_| invalid());
    }
    let mut total = Duration::ZERO;
    let mut rest = text;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(invalid)?;
        let (number, after) = rest.split_at(number_end);
        let unit_end = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_end);
        let number: f64 = number.parse().map_err(|_| invalid())?;
        let scale = match unit {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(invalid()),
        };
        let part = Duration::try_from_secs_f64(number * scale).map_err(|_| invalid())?;
        total = total.checked_add(part).ok_or_else(invalid)?;
        rest = after;
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse() {
        let ok = |text: &str| parse_duration(text).ok();
        assert_eq!(ok("15"), Some(Duration::from_secs(15)));
        assert_eq!(ok("1.5"), Some(Duration::from_millis(1500)));
        assert_eq!(ok("15s"), Some(Duration::from_secs(15)));
        assert_eq!(ok(" 2s "), Some(Duration::from_secs(2)));
        assert_eq!(ok("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(ok("2m"), Some(Duration::from_secs(120)));
        assert_eq!(ok("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(ok("1h"), Some(Duration::from_secs(3600)));
        assert_eq!(ok("0.5s"), Some(Duration::from_millis(500)));
        for bad in [
            "", "s", "15x", "-1", "-1s", "1.2.3s", "15 s", "m1", "NaN", "inf",
        ] {
            assert_eq!(parse_duration(bad).ok(), None, "{bad:?}");
        }
    }
}
