//! `strftime_now(format)`, the date function transformers gives chat templates (gpt-oss's writes
//! "Current date: 2026-01-15"; Llama 3.1's "26 Jul 2024"), as Python's `strftime` writes it in
//! the C locale. Hearth has no time-zone database, so the date is UTC's.

use std::time::{SystemTime, UNIX_EPOCH};

const MONTHS: [&str; 12] = [
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
const WEEKDAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];

/// Seconds since 1970 now (0 if the clock is set before 1970).
pub(crate) fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// The moment `unix_seconds` (UTC) written as `format` asks: `%Y %m %d %H %M %S %y %B %b %h
/// %A %a %j %p %I %e %%`, and `%-d` style (no padding) for the numeric ones. Another
/// directive is an error naming it.
pub(crate) fn strftime(unix_seconds: i64, format: &str) -> Result<String, String> {
    let days = unix_seconds.div_euclid(86_400);
    let second_of_day = unix_seconds.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    let (hour, minute, second) = (
        second_of_day / 3600,
        second_of_day / 60 % 60,
        second_of_day % 60,
    );
    // 1970-01-01 was a Thursday (index 3 from Monday).
    let weekday = (days + 3).rem_euclid(7) as usize;
    let day_of_year = days - days_from_civil(year, 1, 1) + 1;
    let hour12 = if hour % 12 == 0 { 12 } else { hour % 12 };
    let month_name = MONTHS[(month - 1) as usize];

    let mut out = String::with_capacity(format.len() + 16);
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut directive = chars.next();
        let unpadded = directive == Some('-');
        if unpadded {
            directive = chars.next();
        }
        let number = |value: i64, width: usize| match unpadded {
            true => value.to_string(),
            false => format!("{value:0width$}"),
        };
        let text = match directive {
            Some('Y') => year.to_string(),
            Some('y') => number(year.rem_euclid(100), 2),
            Some('m') => number(month, 2),
            Some('d') => number(day, 2),
            Some('e') => format!("{day:2}"),
            Some('H') => number(hour, 2),
            Some('I') => number(hour12, 2),
            Some('M') => number(minute, 2),
            Some('S') => number(second, 2),
            Some('j') => number(day_of_year, 3),
            Some('p') => (if hour < 12 { "AM" } else { "PM" }).to_owned(),
            Some('B') => month_name.to_owned(),
            Some('b') | Some('h') => month_name[..3].to_owned(),
            Some('A') => WEEKDAYS[weekday].to_owned(),
            Some('a') => WEEKDAYS[weekday][..3].to_owned(),
            Some('%') if !unpadded => "%".to_owned(),
            other => {
                let spelled = other.map_or(String::new(), String::from);
                let dash = if unpadded { "-" } else { "" };
                return Err(format!(
                    "the chat template asks for the date as '%{dash}{spelled}', which Hearth \
                     cannot write (it writes %Y %m %d %H %M %S %y %B %b %A %a %j %p %I %e)"
                ));
            }
        };
        out.push_str(&text);
    }
    Ok(out)
}

/// The (year, month, day) of `days` since 1970-01-01 in the proleptic Gregorian calendar
/// (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Days since 1970-01-01 of a date (the inverse of [`civil_from_days`]).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let yoe = year.rem_euclid(400);
    let mp = if month > 2 { month - 3 } else { month + 9 };
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Python's `datetime.fromtimestamp(t, timezone.utc).strftime(f)` for these moments.
    #[test]
    fn dates_are_written_as_python_writes_them() {
        // 2026-01-15 09:30:00 UTC, a Thursday.
        let t = 1_768_469_400;
        assert_eq!(strftime(t, "%Y-%m-%d").unwrap(), "2026-01-15");
        assert_eq!(strftime(t, "%d %b %Y").unwrap(), "15 Jan 2026");
        assert_eq!(strftime(t, "%B %-d, %Y").unwrap(), "January 15, 2026");
        assert_eq!(
            strftime(t, "%A %a %H:%M:%S %I%p %j %y %e %%").unwrap(),
            "Thursday Thu 09:30:00 09AM 015 26 15 %"
        );
        // A leap day, the end of a leap year, midnight and noon.
        assert_eq!(
            strftime(951_782_400, "%Y-%m-%d %j %a").unwrap(),
            "2000-02-29 060 Tue"
        );
        assert_eq!(
            strftime(1_735_603_200 + 43_200, "%Y-%m-%d %j %I %p").unwrap(),
            "2024-12-31 366 12 PM"
        );
        assert_eq!(
            strftime(0, "%Y-%m-%d %H %I %p %A").unwrap(),
            "1970-01-01 00 12 AM Thursday"
        );
        // Before 1970.
        assert_eq!(
            strftime(-86_400, "%Y-%m-%d %A").unwrap(),
            "1969-12-31 Wednesday"
        );
    }

    #[test]
    fn every_day_of_four_centuries_round_trips() {
        for days in (-146_097..146_097).step_by(13) {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days, "{y}-{m}-{d}");
        }
    }

    #[test]
    fn an_unknown_or_cut_directive_is_refused_in_words() {
        for format in ["%Q", "%", "%-", "%-%", "date: %Z"] {
            let err = strftime(0, format).unwrap_err();
            assert!(err.contains("cannot write"), "{format}: {err}");
        }
        assert!(strftime(0, "%Q").unwrap_err().contains("'%Q'"));
        assert_eq!(
            strftime(0, "no directives, ünïcode").unwrap(),
            "no directives, ünïcode"
        );
    }
}
