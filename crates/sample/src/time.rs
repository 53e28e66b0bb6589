//! Calendar arithmetic and date formatting without a clock or a time-zone database, for log
//! dates (`%t`, `%T`, configuration.txt §8.2.6) and the `ltime`, `utime` and `http_date`
//! converters (§7.3.1).
//!
//! Dates arrive as seconds since the Unix epoch plus an offset from UTC in seconds, which the
//! [`Context`](crate::Context) supplies for local time; the crate stays pure because it never
//! asks the system which zone it is in. [`civil`] turns seconds into a proleptic Gregorian
//! date (any `i64` input is accepted: far dates saturate instead of overflowing), and
//! [`strftime`] writes the subset of `strftime(3)` conversions HAProxy users put in formats.

use std::io::Write;

/// Abbreviated English month names, as logs and HTTP dates spell them.
const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];
/// Full month names, for `%B`.
const MONTHS_FULL: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
/// Abbreviated day names, Sunday first, for `%a` and HTTP dates.
const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
/// Full day names, for `%A`.
const DAYS_FULL: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

/// A broken-down date and time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Civil {
    /// The year, e.g. 2024.
    pub year: i64,
    /// The month, 0 (January) to 11.
    pub month: usize,
    /// The day of the month, 1 to 31.
    pub day: u32,
    /// Hours, 0 to 23.
    pub hour: u32,
    /// Minutes, 0 to 59.
    pub minute: u32,
    /// Seconds, 0 to 59.
    pub second: u32,
    /// Day of the week, 0 (Sunday) to 6.
    pub weekday: usize,
    /// Day of the year, 0 to 365.
    pub yearday: u32,
}

fn is_leap(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

/// The date at `secs` seconds after the epoch (negative: before it). Every `i64` is
/// accepted; the arithmetic saturates rather than overflowing at the far ends.
pub fn civil(secs: i64) -> Civil {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Day 0 is 1970-01-01, a Thursday.
    let weekday = usize::try_from((days.rem_euclid(7) + 4) % 7).unwrap_or(0);
    // Counting from 0000-03-01 puts the leap day at the end of each 400-year era, which
    // makes the month lengths regular (the usual days-to-civil method).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month0 = if mp < 10 { mp + 2 } else { mp - 10 };
    let year = yoe
        .saturating_add(era.saturating_mul(400))
        .saturating_add(i64::from(month0 <= 1));
    const CUMULATIVE: [u32; 12] = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334];
    let month = usize::try_from(month0).unwrap_or(0).min(11);
    let day = u32::try_from(day).unwrap_or(1);
    let leap_shift = u32::from(month >= 2 && is_leap(year));
    let yearday = CUMULATIVE.get(month).copied().unwrap_or(0) + day - 1 + leap_shift;
    let rem = u32::try_from(rem).unwrap_or(0);
    Civil {
        year,
        month,
        day,
        hour: rem / 3600,
        minute: rem / 60 % 60,
        second: rem % 60,
        weekday,
        yearday,
    }
}

/// Writes `+hhmm` / `-hhmm` for an offset in seconds east of UTC.
pub(crate) fn write_offset(offset: i32, out: &mut Vec<u8>) {
    let sign = if offset < 0 { '-' } else { '+' };
    let abs = offset.unsigned_abs();
    let _ = write!(out, "{sign}{:02}{:02}", abs / 3600, abs / 60 % 60);
}

fn name(table: &[&'static str], index: usize) -> &'static str {
    table.get(index).copied().unwrap_or("???")
}

/// `dd/Mon/yyyy:hh:mm:ss`, the date part of every HAProxy log date.
pub(crate) fn write_log_date(c: &Civil, out: &mut Vec<u8>) {
    let _ = write!(
        out,
        "{:02}/{}/{:04}:{:02}:{:02}:{:02}",
        c.day,
        name(&MONTHS, c.month),
        c.year,
        c.hour,
        c.minute,
        c.second
    );
}

/// The IMF-fixdate of RFC 9110 §5.6.7 (`Tue, 15 Nov 1994 08:12:31 GMT`).
pub(crate) fn write_http_date(secs: i64, out: &mut Vec<u8>) {
    let c = civil(secs);
    let _ = write!(
        out,
        "{}, {:02} {} {:04} {:02}:{:02}:{:02} GMT",
        name(&DAYS, c.weekday),
        c.day,
        name(&MONTHS, c.month),
        c.year,
        c.hour,
        c.minute,
        c.second
    );
}

/// Formats `secs` (seconds since the epoch, UTC) plus `nanos` nanoseconds, shifted by
/// `offset` seconds, the way `strftime(3)` does with `format`. `zone` is what `%Z` prints
/// (the numeric offset when `None`: the crate knows no zone names). Supported conversions:
/// `%a %A %b %h %B %C %d %D %e %F %H %I %j %k %l %m %M %n %p %R %s %S %t %T %u %w %y %Y %z
/// %Z %%`, and date(1)'s `%N` (nanoseconds, `%3N` for the first three digits...) that
/// `ms_ltime` documents; any other conversion is copied as written, so a typo shows in the
/// output instead of vanishing.
pub fn strftime(
    format: &[u8],
    (secs, nanos): (i64, u32),
    offset: i32,
    zone: Option<&str>,
    out: &mut Vec<u8>,
) {
    let c = civil(secs.saturating_add(i64::from(offset)));
    let hour12 = if c.hour.is_multiple_of(12) {
        12
    } else {
        c.hour % 12
    };
    let mut bytes = format.iter();
    while let Some(&b) = bytes.next() {
        if b != b'%' {
            out.push(b);
            continue;
        }
        let Some(&conv) = bytes.next() else {
            out.push(b'%');
            break;
        };
        let width = match conv {
            b'N' => Some(9),
            b'1'..=b'9' if bytes.as_slice().first() == Some(&b'N') => {
                bytes.next();
                Some(usize::from(conv - b'0'))
            }
            _ => None,
        };
        if let Some(width) = width {
            let digits = format!("{:09}", nanos.min(999_999_999));
            out.extend_from_slice(digits.as_bytes().get(..width).unwrap_or_default());
            continue;
        }
        let _ = match conv {
            b'a' => write!(out, "{}", name(&DAYS, c.weekday)),
            b'A' => write!(out, "{}", name(&DAYS_FULL, c.weekday)),
            b'b' | b'h' => write!(out, "{}", name(&MONTHS, c.month)),
            b'B' => write!(out, "{}", name(&MONTHS_FULL, c.month)),
            b'C' => write!(out, "{:02}", c.year.div_euclid(100)),
            b'd' => write!(out, "{:02}", c.day),
            b'D' => write!(
                out,
                "{:02}/{:02}/{:02}",
                c.month + 1,
                c.day,
                c.year.rem_euclid(100)
            ),
            b'e' => write!(out, "{:2}", c.day),
            b'F' => write!(out, "{:04}-{:02}-{:02}", c.year, c.month + 1, c.day),
            b'H' => write!(out, "{:02}", c.hour),
            b'I' => write!(out, "{hour12:02}"),
            b'j' => write!(out, "{:03}", c.yearday + 1),
            b'k' => write!(out, "{:2}", c.hour),
            b'l' => write!(out, "{hour12:2}"),
            b'm' => write!(out, "{:02}", c.month + 1),
            b'M' => write!(out, "{:02}", c.minute),
            b'n' => writeln!(out),
            b'p' => write!(out, "{}", if c.hour < 12 { "AM" } else { "PM" }),
            b'R' => write!(out, "{:02}:{:02}", c.hour, c.minute),
            b's' => write!(out, "{secs}"),
            b'S' => write!(out, "{:02}", c.second),
            b't' => write!(out, "\t"),
            b'T' => write!(out, "{:02}:{:02}:{:02}", c.hour, c.minute, c.second),
            b'u' => write!(out, "{}", if c.weekday == 0 { 7 } else { c.weekday }),
            b'w' => write!(out, "{}", c.weekday),
            b'y' => write!(out, "{:02}", c.year.rem_euclid(100)),
            b'Y' => write!(out, "{}", c.year),
            b'z' => {
                write_offset(offset, out);
                Ok(())
            }
            b'Z' => match zone {
                Some(zone) => write!(out, "{zone}"),
                None => {
                    write_offset(offset, out);
                    Ok(())
                }
            },
            b'%' => write!(out, "%"),
            other => {
                out.push(b'%');
                out.push(other);
                Ok(())
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fmt(format: &str, secs: i64, offset: i32) -> String {
        let mut out = Vec::new();
        strftime(format.as_bytes(), (secs, 0), offset, Some("UTC"), &mut out);
        String::from_utf8_lossy(&out).into_owned()
    }

    #[test]
    fn known_dates() {
        // 2024-01-02T03:04:05Z, a Tuesday.
        let t = 1_704_164_645;
        assert_eq!(
            fmt("%a %A %d %b %B %Y %H:%M:%S %j %u %w", t, 0),
            "Tue Tuesday 02 Jan January 2024 03:04:05 002 2 2"
        );
        assert_eq!(fmt("%F %T %z", t, 3600), "2024-01-02 04:04:05 +0100");
        assert_eq!(
            fmt("%D %R %I%p %e|%k|%l", t, -5 * 3600),
            "01/01/24 22:04 10PM  1|22|10"
        );
        assert_eq!(fmt("%s %% %q %", t, 0), "1704164645 % %q %");
        // Leap day and the day after the end of February.
        assert_eq!(fmt("%F %j", 951_782_400, 0), "2000-02-29 060");
        assert_eq!(fmt("%F %j", 1_709_251_200, 0), "2024-03-01 061");
        assert_eq!(fmt("%F %T %a", -1, 0), "1969-12-31 23:59:59 Wed");
        assert_eq!(fmt("%z", 0, -(9 * 3600 + 30 * 60)), "-0930");
        let mut out = Vec::new();
        strftime(b"%S.%3N|%6N|%N|%0N", (5, 12_345_678), 0, None, &mut out);
        assert_eq!(out, b"05.012|012345|012345678|%0N");
    }

    #[test]
    fn http_and_log_dates() {
        let mut out = Vec::new();
        write_http_date(784_887_151, &mut out);
        assert_eq!(out, b"Tue, 15 Nov 1994 08:12:31 GMT");
        out.clear();
        write_log_date(&civil(1_704_164_645), &mut out);
        assert_eq!(out, b"02/Jan/2024:03:04:05");
    }

    #[test]
    fn extreme_inputs_do_not_panic() {
        for secs in [i64::MIN, i64::MIN + 1, i64::MAX, i64::MAX - 86_400] {
            let _ = fmt("%a %A %b %B %C %d %D %e %F %j %Y %y %z", secs, i32::MAX);
            let _ = fmt("%a %b %Y", secs, i32::MIN);
            let mut out = Vec::new();
            write_http_date(secs, &mut out);
        }
    }
}
