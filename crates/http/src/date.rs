//! HTTP dates (RFC 9110 §5.6.7) read into seconds since the epoch: the `Expires`,
//! `Last-Modified`, `Date` and `If-Modified-Since` values a cache compares.
//!
//! All three forms a recipient must accept are read: the IMF-fixdate senders generate
//! (`Sun, 06 Nov 1994 08:49:37 GMT`), the obsolete RFC 850 form (`Sunday, 06-Nov-94
//! 08:49:37 GMT`, two-digit years taken as 1970 to 2069) and asctime's (`Sun Nov  6 08:49:37
//! 1994`). The weekday is checked for its spelling only, as HAProxy does. Read
//! [`parse_http_date`].

const MONTHS: [&[u8]; 12] = [
    b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec",
];
const DAYS: [&[u8]; 7] = [b"Mon", b"Tue", b"Wed", b"Thu", b"Fri", b"Sat", b"Sun"];
const LONG_DAYS: [&[u8]; 7] = [
    b"Monday",
    b"Tuesday",
    b"Wednesday",
    b"Thursday",
    b"Friday",
    b"Saturday",
    b"Sunday",
];

/// The date `value` names, in seconds since 1970-01-01T00:00:00Z; `None` when it is none of
/// the three forms, or names no real day or time.
pub fn parse_http_date(value: &[u8]) -> Option<i64> {
    let value = value.trim_ascii();
    imf_fixdate(value)
        .or_else(|| rfc850(value))
        .or_else(|| asctime(value))
}

/// `Sun, 06 Nov 1994 08:49:37 GMT`
fn imf_fixdate(v: &[u8]) -> Option<i64> {
    let (day_name, rest) = v.split_at_checked(3)?;
    DAYS.contains(&day_name).then_some(())?;
    let rest = rest.strip_prefix(b", ")?;
    let (day, rest) = digits(rest, 2)?;
    let rest = rest.strip_prefix(b" ")?;
    let (month, rest) = month(rest)?;
    let rest = rest.strip_prefix(b" ")?;
    let (year, rest) = digits(rest, 4)?;
    let rest = rest.strip_prefix(b" ")?;
    let (time, rest) = time_of_day(rest)?;
    (rest == b" GMT").then_some(())?;
    seconds(year, month, day, time)
}

/// `Sunday, 06-Nov-94 08:49:37 GMT`
fn rfc850(v: &[u8]) -> Option<i64> {
    let comma = v.iter().position(|&b| b == b',')?;
    LONG_DAYS.contains(&&v[..comma]).then_some(())?;
    let rest = v[comma..].strip_prefix(b", ")?;
    let (day, rest) = digits(rest, 2)?;
    let rest = rest.strip_prefix(b"-")?;
    let (month, rest) = month(rest)?;
    let rest = rest.strip_prefix(b"-")?;
    let (year, rest) = digits(rest, 2)?;
    let year = if year < 70 { 2000 + year } else { 1900 + year };
    let rest = rest.strip_prefix(b" ")?;
    let (time, rest) = time_of_day(rest)?;
    (rest == b" GMT").then_some(())?;
    seconds(year, month, day, time)
}

/// `Sun Nov  6 08:49:37 1994`
fn asctime(v: &[u8]) -> Option<i64> {
    let (day_name, rest) = v.split_at_checked(3)?;
    DAYS.contains(&day_name).then_some(())?;
    let rest = rest.strip_prefix(b" ")?;
    let (month, rest) = month(rest)?;
    let rest = rest.strip_prefix(b" ")?;
    // The day is two characters, a space standing for a leading zero.
    let rest = rest.strip_prefix(b" ").map_or(rest, |r| r);
    let (day, rest) = match digits(rest, 2) {
        Some(found) => found,
        None => digits(rest, 1)?,
    };
    let rest = rest.strip_prefix(b" ")?;
    let (time, rest) = time_of_day(rest)?;
    let rest = rest.strip_prefix(b" ")?;
    let (year, rest) = digits(rest, 4)?;
    rest.is_empty().then_some(())?;
    seconds(year, month, day, time)
}

/// Exactly `n` ASCII digits at the start of `v`, as a number, and what follows.
fn digits(v: &[u8], n: usize) -> Option<(i64, &[u8])> {
    let (number, rest) = v.split_at_checked(n)?;
    if !number.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let value = number
        .iter()
        .fold(0i64, |acc, d| acc * 10 + i64::from(d - b'0'));
    Some((value, rest))
}

/// A month's three-letter name (1 to 12), and what follows.
fn month(v: &[u8]) -> Option<(i64, &[u8])> {
    let (name, rest) = v.split_at_checked(3)?;
    let index = MONTHS.iter().position(|m| *m == name)?;
    Some((index as i64 + 1, rest))
}

/// `HH:MM:SS` as seconds into the day, and what follows.
fn time_of_day(v: &[u8]) -> Option<(i64, &[u8])> {
    let (hour, rest) = digits(v, 2)?;
    let (minute, rest) = digits(rest.strip_prefix(b":")?, 2)?;
    let (second, rest) = digits(rest.strip_prefix(b":")?, 2)?;
    // 60: a leap second (RFC 9110 allows it).
    (hour < 24 && minute < 60 && second <= 60).then_some((hour * 3600 + minute * 60 + second, rest))
}

/// Seconds since the epoch of a day of the proleptic Gregorian calendar and a time in it.
fn seconds(year: i64, month: i64, day: i64, time: i64) -> Option<i64> {
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let month_days = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if day < 1 || day > month_days[(month - 1) as usize] {
        return None;
    }
    // Days from the civil date (H. Hinnant's algorithm): years counted from March, so the
    // leap day ends a year.
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let month_from_march = (month + 9) % 12;
    let day_of_year = (153 * month_from_march + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    let days = era * 146_097 + day_of_era - 719_468;
    Some(days * 86_400 + time)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 1994-11-06T08:49:37Z, RFC 9110's example.
    const EXAMPLE: i64 = 784_111_777;

    #[test]
    fn reads_the_three_forms() {
        assert_eq!(
            parse_http_date(b"Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(EXAMPLE)
        );
        assert_eq!(
            parse_http_date(b"Sunday, 06-Nov-94 08:49:37 GMT"),
            Some(EXAMPLE)
        );
        assert_eq!(parse_http_date(b"Sun Nov  6 08:49:37 1994"), Some(EXAMPLE));
        assert_eq!(parse_http_date(b" Thu, 01 Jan 1970 00:00:00 GMT "), Some(0));
        assert_eq!(
            parse_http_date(b"Tue, 29 Feb 2000 23:59:60 GMT"),
            Some(951_868_800)
        );
        assert_eq!(
            parse_http_date(b"Thursday, 01-Jan-25 00:00:00 GMT"),
            Some(1_735_689_600)
        );
    }

    #[test]
    fn refuses_what_is_not_a_date() {
        for bad in [
            &b""[..],
            b"0",
            b"Sun, 06 Nov 1994 08:49:37 UTC",
            b"Sun, 6 Nov 1994 08:49:37 GMT",
            b"Sun, 31 Nov 1994 08:49:37 GMT",
            b"Sun, 29 Feb 1900 08:49:37 GMT",
            b"Sun, 06 Nov 1994 24:00:00 GMT",
            b"Xyz, 06 Nov 1994 08:49:37 GMT",
            b"Sun, 06 Nox 1994 08:49:37 GMT",
            b"Sun, 06 Nov 1994 08:49:37 GMTx",
            b"Sunday, 06-Nov-1994 08:49:37 GMT",
            b"Sun Nov  6 08:49:37 94",
            b"\xff\xfe",
        ] {
            assert_eq!(
                parse_http_date(bad),
                None,
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
