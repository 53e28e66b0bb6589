//! Parses the time and size values of the configuration (manual §2.5 and §2.6).
//!
//! Keyword parsers call these on single words after lexing: [`parse_timeout`] for every
//! `timeout ...` keyword, [`parse_time`] for other delays whose default unit is not the
//! millisecond, and [`parse_size`] for byte counts. Values are integers (the manual forbids
//! decimals) followed by an optional unit. Read [`parse_time`] first.

use std::fmt;
use std::time::Duration;

/// The unit of a time value (§2.5). Suffixes are case-sensitive, as in HAProxy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeUnit {
    /// Microseconds, suffix `us`.
    Us,
    /// Milliseconds, suffix `ms` (the usual default).
    Ms,
    /// Seconds, suffix `s`.
    S,
    /// Minutes, suffix `m`.
    M,
    /// Hours, suffix `h`.
    H,
    /// Days, suffix `d`.
    D,
}

impl TimeUnit {
    /// The unit written after a number, or `None` if `suffix` is not one.
    pub fn from_suffix(suffix: &str) -> Option<TimeUnit> {
        Some(match suffix {
            "us" => TimeUnit::Us,
            "ms" => TimeUnit::Ms,
            "s" => TimeUnit::S,
            "m" => TimeUnit::M,
            "h" => TimeUnit::H,
            "d" => TimeUnit::D,
            _ => return None,
        })
    }

    /// The suffix naming this unit.
    pub fn suffix(self) -> &'static str {
        match self {
            TimeUnit::Us => "us",
            TimeUnit::Ms => "ms",
            TimeUnit::S => "s",
            TimeUnit::M => "m",
            TimeUnit::H => "h",
            TimeUnit::D => "d",
        }
    }

    /// `value` of this unit as a duration, `None` if it does not fit.
    fn duration(self, value: u64) -> Option<Duration> {
        let seconds = |factor: u64| value.checked_mul(factor).map(Duration::from_secs);
        match self {
            TimeUnit::Us => Some(Duration::from_micros(value)),
            TimeUnit::Ms => Some(Duration::from_millis(value)),
            TimeUnit::S => seconds(1),
            TimeUnit::M => seconds(60),
            TimeUnit::H => seconds(3600),
            TimeUnit::D => seconds(86_400),
        }
    }
}

/// Why a time or size value was rejected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UnitError {
    /// The value is empty.
    MissingValue,
    /// The value does not start with a digit; holds the value.
    NotANumber(String),
    /// A decimal point: §2.6 says both formats take integers only.
    NotAnInteger(String),
    /// The text after the digits is not a time unit; holds that text.
    InvalidTimeUnit(String),
    /// The text after the digits is not a size unit; holds that text.
    InvalidSizeUnit(String),
    /// The value does not fit in 64 bits.
    Overflow,
    /// A timeout above 2147483647 ms, which HAProxy's timers cannot represent either.
    TimerOverflow,
}

impl fmt::Display for UnitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UnitError::MissingValue => f.write_str("missing value"),
            UnitError::NotANumber(v) => write!(f, "expected a number, found '{v}'"),
            UnitError::NotAnInteger(v) => {
                write!(
                    f,
                    "'{v}' is not an integer (decimal values are not allowed)"
                )
            }
            UnitError::InvalidTimeUnit(u) => write!(f, "invalid time unit '{u}'"),
            UnitError::InvalidSizeUnit(u) => write!(f, "invalid size unit '{u}'"),
            UnitError::Overflow => f.write_str("value overflow"),
            UnitError::TimerOverflow => {
                f.write_str("timer overflow: the maximum is 2147483647 ms (about 24.8 days)")
            }
        }
    }
}

impl std::error::Error for UnitError {}

/// The largest timeout HAProxy accepts, in milliseconds (a signed 32-bit tick count).
pub const MAX_TIMEOUT_MS: u64 = 2_147_483_647;

/// A time value as read, and what HAProxy 2.6 would warn about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Time {
    /// The value.
    pub duration: Duration,
    /// Text after a valid unit (`15min` is 15 minutes and `in`), which HAProxy 2.6 ignores
    /// with a warning and later versions refuse: the warning to give, if any.
    pub warning: Option<String>,
}

/// Parses a time value: digits, then an optional unit among `us`, `ms`, `s`, `m`, `h`, `d`
/// (§2.5). Without a unit the value is in `default_unit`. As in HAProxy 2.6, characters after
/// a unit are ignored with a warning; a unit that does not start as one of those is an error.
pub fn parse_time(s: &str, default_unit: TimeUnit) -> Result<Time, UnitError> {
    let (value, suffix) = split_number(s)?;
    // The longest unit the suffix starts with: `ms` before `m`, `us` (there is no `u`).
    let unit = ["us", "ms", "s", "m", "h", "d"]
        .into_iter()
        .find(|unit| suffix.starts_with(unit));
    let (unit, ignored) = match unit {
        Some(unit) => (TimeUnit::from_suffix(unit), &suffix[unit.len()..]),
        None if suffix.is_empty() => (Some(default_unit), ""),
        None => (None, suffix),
    };
    let unit = unit.ok_or_else(|| UnitError::InvalidTimeUnit(suffix.into()))?;
    let duration = unit.duration(value).ok_or(UnitError::Overflow)?;
    let warning = (!ignored.is_empty()).then(|| {
        format!(
            "time value '{s}': '{ignored}' after the unit is ignored (the units are us, ms, s, \
             m, h and d; later HAProxy versions refuse such a value)"
        )
    });
    Ok(Time { duration, warning })
}

/// Parses a `timeout ...` value: [`parse_time`] with milliseconds by default, rounded up to a
/// whole millisecond (so `1us` is 1 ms, never a zero "no timeout"), and at most
/// [`MAX_TIMEOUT_MS`] ("timer overflow", as HAProxy reports).
pub fn parse_timeout(s: &str) -> Result<Time, UnitError> {
    let time = parse_time(s, TimeUnit::Ms)?;
    let millis = time.duration.as_nanos().div_ceil(1_000_000);
    match u64::try_from(millis) {
        Ok(ms) if ms <= MAX_TIMEOUT_MS => Ok(Time {
            duration: Duration::from_millis(ms),
            ..time
        }),
        _ => Err(UnitError::TimerOverflow),
    }
}

/// Parses a size in bytes: digits, then an optional `k`, `m` or `g` (any case) multiplying by
/// 1024, 1024² or 1024³ (§2.6).
pub fn parse_size(s: &str) -> Result<u64, UnitError> {
    let (value, suffix) = split_number(s)?;
    let shift = match suffix {
        "" => 0,
        "k" | "K" => 10,
        "m" | "M" => 20,
        "g" | "G" => 30,
        _ => return Err(UnitError::InvalidSizeUnit(suffix.into())),
    };
    value.checked_mul(1 << shift).ok_or(UnitError::Overflow)
}

/// Splits `s` into its leading decimal integer and the rest.
fn split_number(s: &str) -> Result<(u64, &str), UnitError> {
    if s.is_empty() {
        return Err(UnitError::MissingValue);
    }
    let digits_len = s.bytes().take_while(u8::is_ascii_digit).count();
    let (digits, rest) = s.split_at(digits_len);
    if digits.is_empty() {
        return Err(UnitError::NotANumber(s.into()));
    }
    if rest.starts_with('.') {
        return Err(UnitError::NotAnInteger(s.into()));
    }
    // Only ASCII digits remain, so the only possible failure is overflow.
    let value = digits.parse::<u64>().map_err(|_| UnitError::Overflow)?;
    Ok((value, rest))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The value of a time that needs no warning.
    fn strict(s: &str, unit: TimeUnit) -> Result<Duration, UnitError> {
        let time = parse_time(s, unit)?;
        assert_eq!(time.warning, None, "{s}");
        Ok(time.duration)
    }

    fn strict_timeout(s: &str) -> Result<Duration, UnitError> {
        let time = parse_timeout(s)?;
        assert_eq!(time.warning, None, "{s}");
        Ok(time.duration)
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn time_units() {
        assert_eq!(strict("5us", TimeUnit::Ms), Ok(Duration::from_micros(5)));
        assert_eq!(strict("5ms", TimeUnit::S), Ok(ms(5)));
        assert_eq!(strict("5s", TimeUnit::Ms), Ok(ms(5_000)));
        assert_eq!(strict("5m", TimeUnit::Ms), Ok(ms(300_000)));
        assert_eq!(strict("5h", TimeUnit::Ms), Ok(ms(18_000_000)));
        assert_eq!(strict("5d", TimeUnit::Ms), Ok(ms(432_000_000)));
        assert_eq!(strict("0", TimeUnit::Ms), Ok(Duration::ZERO));
        assert_eq!(strict("007s", TimeUnit::Ms), Ok(ms(7_000)));
    }

    #[test]
    fn default_unit() {
        assert_eq!(strict("5", TimeUnit::Us), Ok(Duration::from_micros(5)));
        assert_eq!(strict("5", TimeUnit::Ms), Ok(ms(5)));
        assert_eq!(strict("5", TimeUnit::S), Ok(ms(5_000)));
        assert_eq!(strict("5", TimeUnit::M), Ok(ms(300_000)));
        assert_eq!(strict("5", TimeUnit::H), Ok(ms(18_000_000)));
        assert_eq!(strict("5", TimeUnit::D), Ok(ms(432_000_000)));
    }

    #[test]
    fn suffix_round_trip() {
        for unit in [
            TimeUnit::Us,
            TimeUnit::Ms,
            TimeUnit::S,
            TimeUnit::M,
            TimeUnit::H,
            TimeUnit::D,
        ] {
            assert_eq!(TimeUnit::from_suffix(unit.suffix()), Some(unit));
        }
    }

    #[test]
    fn time_errors() {
        assert_eq!(strict("", TimeUnit::Ms), Err(UnitError::MissingValue));
        assert_eq!(
            strict("", TimeUnit::Ms).unwrap_err().to_string(),
            "missing value"
        );
        assert_eq!(
            strict("ms", TimeUnit::Ms),
            Err(UnitError::NotANumber("ms".into()))
        );
        assert_eq!(
            strict("-5s", TimeUnit::Ms),
            Err(UnitError::NotANumber("-5s".into()))
        );
        assert_eq!(
            strict(" 5", TimeUnit::Ms),
            Err(UnitError::NotANumber(" 5".into()))
        );
        assert_eq!(
            strict("-5s", TimeUnit::Ms).unwrap_err().to_string(),
            "expected a number, found '-5s'"
        );
        assert_eq!(
            strict("5x", TimeUnit::Ms),
            Err(UnitError::InvalidTimeUnit("x".into()))
        );
        assert_eq!(
            strict("5x", TimeUnit::Ms).unwrap_err().to_string(),
            "invalid time unit 'x'"
        );
        assert_eq!(
            strict("5S", TimeUnit::Ms),
            Err(UnitError::InvalidTimeUnit("S".into()))
        );
        assert_eq!(
            strict("5 s", TimeUnit::Ms),
            Err(UnitError::InvalidTimeUnit(" s".into()))
        );
        assert_eq!(
            strict("5u", TimeUnit::Ms),
            Err(UnitError::InvalidTimeUnit("u".into()))
        );
        assert_eq!(
            strict("1.5s", TimeUnit::Ms).unwrap_err().to_string(),
            "'1.5s' is not an integer (decimal values are not allowed)"
        );
    }

    #[test]
    fn text_after_a_unit_is_ignored_with_a_warning() {
        // As HAProxy 2.6 reads them: the longest unit the text starts with, the rest ignored.
        for (text, value) in [
            ("15min", ms(900_000)),
            ("5sec", ms(5_000)),
            ("5mss", ms(5)),
            ("1s[", ms(1_000)),
            ("2us1", Duration::from_micros(2)),
            ("1hr", ms(3_600_000)),
        ] {
            let time = parse_time(text, TimeUnit::Ms).unwrap();
            assert_eq!(time.duration, value, "{text}");
            let warning = time.warning.unwrap();
            assert!(
                warning.starts_with(&format!("time value '{text}': '")),
                "{warning}"
            );
        }
        let warning = parse_timeout("15min").unwrap().warning.unwrap();
        assert!(
            warning.contains("'in' after the unit is ignored"),
            "{warning}"
        );
    }

    #[test]
    fn time_overflow() {
        assert_eq!(
            strict("99999999999999999999", TimeUnit::Ms),
            Err(UnitError::Overflow)
        );
        assert_eq!(
            strict("99999999999999999999", TimeUnit::Ms)
                .unwrap_err()
                .to_string(),
            "value overflow"
        );
        let max = u64::MAX.to_string();
        assert_eq!(
            strict(&format!("{max}s"), TimeUnit::Ms),
            Ok(Duration::from_secs(u64::MAX))
        );
        assert_eq!(
            strict(&format!("{max}m"), TimeUnit::Ms),
            Err(UnitError::Overflow)
        );
        assert_eq!(
            strict(&format!("{max}d"), TimeUnit::Ms),
            Err(UnitError::Overflow)
        );
        assert!(strict(&format!("{max}us"), TimeUnit::Ms).is_ok());
    }

    #[test]
    fn timeouts() {
        assert_eq!(strict_timeout("5000"), Ok(ms(5_000)));
        assert_eq!(strict_timeout("50s"), Ok(ms(50_000)));
        assert_eq!(strict_timeout("0"), Ok(Duration::ZERO));
        assert_eq!(strict_timeout("0us"), Ok(Duration::ZERO));
        assert_eq!(strict_timeout("1us"), Ok(ms(1)));
        assert_eq!(strict_timeout("999us"), Ok(ms(1)));
        assert_eq!(strict_timeout("1000us"), Ok(ms(1)));
        assert_eq!(strict_timeout("1001us"), Ok(ms(2)));
        assert_eq!(strict_timeout("24d"), Ok(ms(2_073_600_000)));
        assert_eq!(strict_timeout("2147483647"), Ok(ms(MAX_TIMEOUT_MS)));
        assert_eq!(
            strict_timeout("2147483647001us"),
            Err(UnitError::TimerOverflow)
        );
        assert_eq!(strict_timeout("2147483648"), Err(UnitError::TimerOverflow));
        assert_eq!(strict_timeout("25d"), Err(UnitError::TimerOverflow));
        assert_eq!(
            strict_timeout("25d").unwrap_err().to_string(),
            "timer overflow: the maximum is 2147483647 ms (about 24.8 days)"
        );
        assert_eq!(strict_timeout("x"), Err(UnitError::NotANumber("x".into())));
        let max = u64::MAX.to_string();
        assert_eq!(
            strict_timeout(&format!("{max}s")),
            Err(UnitError::TimerOverflow)
        );
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("0"), Ok(0));
        assert_eq!(parse_size("123"), Ok(123));
        assert_eq!(parse_size("2k"), Ok(2_048));
        assert_eq!(parse_size("2K"), Ok(2_048));
        assert_eq!(parse_size("3m"), Ok(3 * 1_048_576));
        assert_eq!(parse_size("3M"), Ok(3 * 1_048_576));
        assert_eq!(parse_size("4g"), Ok(4 * 1_073_741_824));
        assert_eq!(parse_size("4G"), Ok(4 * 1_073_741_824));
    }

    #[test]
    fn size_errors() {
        assert_eq!(parse_size(""), Err(UnitError::MissingValue));
        assert_eq!(parse_size("k"), Err(UnitError::NotANumber("k".into())));
        assert_eq!(
            parse_size("1kb"),
            Err(UnitError::InvalidSizeUnit("kb".into()))
        );
        assert_eq!(
            parse_size("1t"),
            Err(UnitError::InvalidSizeUnit("t".into()))
        );
        assert_eq!(
            parse_size("1t").unwrap_err().to_string(),
            "invalid size unit 't'"
        );
        assert_eq!(
            parse_size("1.5k"),
            Err(UnitError::NotAnInteger("1.5k".into()))
        );
        assert_eq!(parse_size("18446744073709551615"), Ok(u64::MAX));
        assert_eq!(parse_size("18446744073709551616"), Err(UnitError::Overflow));
        assert_eq!(parse_size("17179869184g"), Err(UnitError::Overflow));
        assert_eq!(parse_size("17179869183g"), Ok(17_179_869_183 << 30));
        assert_eq!(parse_size("18014398509481984k"), Err(UnitError::Overflow));
    }
}
