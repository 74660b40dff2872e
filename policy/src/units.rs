//! Human units for sizes and durations, so admins write "512MiB" and "30s"
//! instead of counting zeros.

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// A number of bytes; reads "512MiB", "10MB", "0B" or a plain integer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ByteSize(pub u64);

/// A duration that must carry a unit: "30s", "500ms", "1h30m".
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HumanDuration(pub Duration);

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const TIB: u64 = 1 << 40;

/// Printing picks the shortest exact spelling; ties go to the earlier unit.
const SIZE_UNITS: &[(&str, u64)] = &[
    ("TiB", TIB),
    ("GiB", GIB),
    ("MiB", MIB),
    ("KiB", KIB),
    ("TB", 1_000_000_000_000),
    ("GB", 1_000_000_000),
    ("MB", 1_000_000),
    ("KB", 1_000),
    ("B", 1),
];

impl ByteSize {
    pub const fn kib(n: u64) -> Self {
        ByteSize(n.saturating_mul(KIB))
    }
    pub const fn mib(n: u64) -> Self {
        ByteSize(n.saturating_mul(MIB))
    }
    pub const fn gib(n: u64) -> Self {
        ByteSize(n.saturating_mul(GIB))
    }

    pub fn bytes(self) -> u64 {
        self.0
    }

    /// Parses the string form; the error is a complete sentence for the admin.
    pub fn parse(text: &str) -> Result<Self, String> {
        let bad = || format!("{text:?} is not a size (try \"512MiB\")");
        let s = text.trim();
        let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        let (digits, unit) = s.split_at(split);
        if digits.is_empty() {
            return Err(bad());
        }
        let unit = unit.trim_start();
        if unit.is_empty() {
            return Err(format!(
                "{text:?} has no unit (try \"{digits}MiB\", or {digits} without quotes for bytes)"
            ));
        }
        let mult = SIZE_UNITS
            .iter()
            .find(|(name, _)| *name == unit)
            .map(|(_, m)| *m)
            .ok_or_else(bad)?;
        let too_large = || format!("{text:?} is too large (at most {} bytes)", u64::MAX);
        let n: u64 = digits.parse().map_err(|_| too_large())?;
        n.checked_mul(mult).map(ByteSize).ok_or_else(too_large)
    }
}

impl fmt::Display for ByteSize {
    /// The shortest exact spelling: 536870912 -> "512MiB", 10000000 -> "10MB".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0;
        if n == 0 {
            return f.write_str("0B");
        }
        let best = SIZE_UNITS
            .iter()
            .filter(|(_, m)| n.is_multiple_of(*m))
            .map(|(name, m)| format!("{}{name}", n / m))
            .min_by_key(String::len)
            .unwrap_or_else(|| format!("{n}B"));
        f.write_str(&best)
    }
}

impl FromStr for ByteSize {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        ByteSize::parse(s)
    }
}

impl Serialize for ByteSize {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = ByteSize;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a size such as \"512MiB\" or a number of bytes")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<ByteSize, E> {
                Ok(ByteSize(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<ByteSize, E> {
                u64::try_from(v).map(ByteSize).map_err(|_| {
                    E::custom(format!(
                        "{v} is not a size (must not be negative; try \"512MiB\")"
                    ))
                })
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ByteSize, E> {
                ByteSize::parse(v).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// Components in the only order they may appear, largest first.
const DURATION_UNITS: &[(&str, u128)] = &[
    ("h", 3_600_000_000_000),
    ("m", 60_000_000_000),
    ("s", 1_000_000_000),
    ("ms", 1_000_000),
    ("us", 1_000),
    ("ns", 1),
];

impl HumanDuration {
    pub const fn secs(n: u64) -> Self {
        HumanDuration(Duration::from_secs(n))
    }
    pub const fn millis(n: u64) -> Self {
        HumanDuration(Duration::from_millis(n))
    }

    pub fn get(self) -> Duration {
        self.0
    }

    /// Parses "1h30m" style text; components go from hours down to
    /// nanoseconds, each at most once, so "30m1h" is rejected as a likely typo.
    pub fn parse(text: &str) -> Result<Self, String> {
        let bad =
            || format!("{text:?} is not a duration (try \"30s\", \"500ms\", \"5m\" or \"1h30m\")");
        let too_long = || format!("{text:?} is too long a duration");
        let s = text.trim();
        if s.is_empty() {
            return Err(bad());
        }
        if s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!("{text:?} has no unit (try \"{s}s\")"));
        }
        let mut rest = s;
        let mut total: u128 = 0;
        let mut next_unit = 0usize;
        while !rest.is_empty() {
            let split = rest
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len());
            let (digits, tail) = rest.split_at(split);
            if digits.is_empty() {
                return Err(bad());
            }
            let tail = tail.trim_start();
            let unit_len = tail
                .find(|c: char| !c.is_ascii_alphabetic())
                .unwrap_or(tail.len());
            let (unit, tail) = tail.split_at(unit_len);
            let idx = DURATION_UNITS[next_unit..]
                .iter()
                .position(|(name, _)| *name == unit)
                .map(|i| i + next_unit)
                .ok_or_else(bad)?;
            next_unit = idx + 1;
            let n: u128 = digits.parse().map_err(|_| too_long())?;
            let nanos = n
                .checked_mul(DURATION_UNITS[idx].1)
                .and_then(|v| total.checked_add(v))
                .ok_or_else(too_long)?;
            total = nanos;
            rest = tail.trim_start();
        }
        let secs = u64::try_from(total / 1_000_000_000).map_err(|_| too_long())?;
        // The remainder is below 10^9, so it always fits.
        let sub = u32::try_from(total % 1_000_000_000).map_err(|_| too_long())?;
        Ok(HumanDuration(Duration::new(secs, sub)))
    }
}

impl fmt::Display for HumanDuration {
    /// The exact compound form: 90s -> "1m30s", 1.5s -> "1s500ms".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut left = self.0.as_nanos();
        if left == 0 {
            return f.write_str("0s");
        }
        for (name, size) in DURATION_UNITS {
            let n = left / size;
            if n > 0 {
                write!(f, "{n}{name}")?;
                left %= size;
            }
        }
        Ok(())
    }
}

impl FromStr for HumanDuration {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        HumanDuration::parse(s)
    }
}

impl Serialize for HumanDuration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for HumanDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = HumanDuration;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration such as \"30s\", \"500ms\" or \"1h30m\"")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<HumanDuration, E> {
                Err(E::custom(format!(
                    "{v} is a bare number, not a duration (write it with a unit, e.g. \"{v}s\")"
                )))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<HumanDuration, E> {
                let hint = if v >= 0 {
                    v.to_string()
                } else {
                    "30".to_string()
                };
                Err(E::custom(format!(
                    "{v} is a bare number, not a duration (write it with a unit, e.g. \"{hint}s\")"
                )))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<HumanDuration, E> {
                HumanDuration::parse(v).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn size_table() {
        let ok: &[(&str, u64)] = &[
            ("0B", 0),
            ("1B", 1),
            ("64KiB", 64 * 1024),
            ("512MiB", 512 << 20),
            ("1GiB", 1 << 30),
            ("2TiB", 2 << 40),
            ("10MB", 10_000_000),
            ("3KB", 3_000),
            ("4GB", 4_000_000_000),
            ("5TB", 5_000_000_000_000),
            ("512 MiB", 512 << 20),
            ("  7B  ", 7),
        ];
        for (text, want) in ok {
            assert_eq!(ByteSize::parse(text), Ok(ByteSize(*want)), "{text}");
        }
        for bad in [
            "",
            "MiB",
            "12XB",
            "1.5GiB",
            "-1MiB",
            "1 MiB extra",
            "1mib",
            "0x10B",
            "1KiB1B",
        ] {
            assert!(ByteSize::parse(bad).is_err(), "{bad:?} should fail");
        }
        assert_eq!(
            ByteSize::parse("12XB").unwrap_err(),
            r#""12XB" is not a size (try "512MiB")"#
        );
        assert!(ByteSize::parse("512").unwrap_err().contains("no unit"));
    }

    #[test]
    fn size_overflow_is_an_error() {
        assert!(ByteSize::parse("16777216TiB")
            .unwrap_err()
            .contains("too large"));
        assert!(ByteSize::parse("99999999999999999999B")
            .unwrap_err()
            .contains("too large"));
        assert_eq!(
            ByteSize::parse("16777215TiB"),
            Ok(ByteSize(16_777_215 * TIB))
        );
    }

    #[test]
    fn size_display_picks_nicest_exact_unit() {
        let cases: &[(u64, &str)] = &[
            (0, "0B"),
            (1, "1B"),
            (536_870_912, "512MiB"),
            (10_000_000, "10MB"),
            (1024, "1KiB"),
            (1000, "1KB"),
            (1_024_000, "1024KB"),
            (1_000_000_000_000, "1TB"),
            (2 * TIB, "2TiB"),
            (1025, "1025B"),
            (10 * GIB, "10GiB"),
            (u64::MAX, "18446744073709551615B"),
        ];
        for (n, text) in cases {
            assert_eq!(ByteSize(*n).to_string(), *text);
        }
    }

    #[test]
    fn duration_table() {
        let ok: &[(&str, Duration)] = &[
            ("30s", Duration::from_secs(30)),
            ("500ms", Duration::from_millis(500)),
            ("5m", Duration::from_secs(300)),
            ("1h", Duration::from_secs(3600)),
            ("1h30m", Duration::from_secs(5400)),
            ("1h 30m 5s", Duration::from_secs(5405)),
            ("0s", Duration::ZERO),
            ("1s500ms", Duration::from_millis(1500)),
            ("250us", Duration::from_micros(250)),
            ("7ns", Duration::from_nanos(7)),
            ("10 s", Duration::from_secs(10)),
        ];
        for (text, want) in ok {
            assert_eq!(
                HumanDuration::parse(text),
                Ok(HumanDuration(*want)),
                "{text}"
            );
        }
        for bad in [
            "",
            "s",
            "30",
            "1.5h",
            "30m1h",
            "1s1s",
            "1d",
            "-1s",
            "30 seconds",
            "1h30",
        ] {
            assert!(HumanDuration::parse(bad).is_err(), "{bad:?} should fail");
        }
        assert!(HumanDuration::parse("30").unwrap_err().contains("\"30s\""));
    }

    #[test]
    fn duration_overflow_is_an_error() {
        let huge = format!("{}h", u64::MAX);
        assert!(HumanDuration::parse(&huge)
            .unwrap_err()
            .contains("too long"));
        let digits = "9".repeat(60) + "s";
        assert!(HumanDuration::parse(&digits).is_err());
    }

    #[test]
    fn duration_display() {
        let cases: &[(Duration, &str)] = &[
            (Duration::ZERO, "0s"),
            (Duration::from_secs(90), "1m30s"),
            (Duration::from_secs(30), "30s"),
            (Duration::from_secs(86_400), "24h"),
            (Duration::from_millis(1500), "1s500ms"),
            (Duration::from_nanos(1_001), "1us1ns"),
        ];
        for (d, text) in cases {
            assert_eq!(HumanDuration(*d).to_string(), *text);
        }
    }

    proptest! {
        #[test]
        fn size_round_trips(n in any::<u64>()) {
            let text = ByteSize(n).to_string();
            prop_assert_eq!(ByteSize::parse(&text), Ok(ByteSize(n)));
        }

        #[test]
        fn duration_round_trips(secs in any::<u64>(), nanos in 0u32..1_000_000_000) {
            let d = HumanDuration(Duration::new(secs, nanos));
            prop_assert_eq!(HumanDuration::parse(&d.to_string()), Ok(d));
        }

        #[test]
        fn junk_never_panics(s in "\\PC{0,24}") {
            let _ = ByteSize::parse(&s);
            let _ = HumanDuration::parse(&s);
        }

        #[test]
        fn unit_like_junk_never_panics(s in "[0-9 ]{0,30}[a-zA-Z]{0,4}[0-9a-z ]{0,8}") {
            let _ = ByteSize::parse(&s);
            let _ = HumanDuration::parse(&s);
        }
    }
}
