//! The summary of a repeated measurement: median, min and max (the median of an even count is
//! the mean of the middle two). It never drops an outlier: the spread is the point.

/// Median, min and max of some repeats; `n` is how many there were.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Spread {
    pub(crate) median: f64,
    pub(crate) min: f64,
    pub(crate) max: f64,
    pub(crate) n: usize,
}

impl Spread {
    /// None for no values (a row that could not run).
    pub(crate) fn of(values: &[f64]) -> Option<Spread> {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let mid = v.len() / 2;
        let median = if v.len().is_multiple_of(2) {
            (v[mid - 1] + v[mid]) / 2.0
        } else {
            v[mid]
        };
        Some(Spread {
            median,
            min: v[0],
            max: v[v.len() - 1],
            n: v.len(),
        })
    }

    /// `median [min–max]` with `decimals`, or the median alone for one value.
    pub(crate) fn text(&self, decimals: usize) -> String {
        if self.n == 1 {
            format!("{:.*}", decimals, self.median)
        } else {
            format!(
                "{:.*} [{:.*}–{:.*}]",
                decimals, self.median, decimals, self.min, decimals, self.max
            )
        }
    }
}

/// A spread's text, or `–` when there is none.
pub(crate) fn text(s: Option<Spread>, decimals: usize) -> String {
    s.map_or_else(|| "–".into(), |s| s.text(decimals))
}

#[cfg(test)]
mod tests {
    use super::Spread;

    #[test]
    fn medians_of_odd_and_even_counts() {
        let s = Spread::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.n), (2.0, 1.0, 3.0, 3));
        assert_eq!(Spread::of(&[4.0, 1.0]).unwrap().median, 2.5);
        assert_eq!(Spread::of(&[]), None);
        assert_eq!(Spread::of(&[1.5]).unwrap().text(1), "1.5");
        assert_eq!(Spread::of(&[1.0, 2.0, 3.0]).unwrap().text(0), "2 [1–3]");
    }
}
