//! Writing metric families with prometheus-client's encoder: constant
//! counters and gauges, and Prometheus histograms converted from the
//! stats' hdrhistograms.

use std::fmt;

use hdrhistogram::Histogram;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeCounterValue, EncodeGaugeValue, EncodeLabelSet, EncodeMetric,
    NoLabelSet,
};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;

/// One counter family (`_total` is appended to `name`).
pub(super) fn counters<L: EncodeLabelSet, N: EncodeCounterValue>(
    d: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: impl IntoIterator<Item = (L, N)>,
) -> fmt::Result {
    let mut m = d.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, v) in series {
        ConstCounter::new(v).encode(m.encode_family(&labels)?)?;
    }
    Ok(())
}

/// One gauge family.
pub(super) fn gauges<L: EncodeLabelSet, N: EncodeGaugeValue>(
    d: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: impl IntoIterator<Item = (L, N)>,
) -> fmt::Result {
    let mut m = d.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, v) in series {
        ConstGauge::new(v).encode(m.encode_family(&labels)?)?;
    }
    Ok(())
}

/// One histogram family from hdrhistograms; `bounds` and the recorded
/// values are in units of 1/`per_unit` of the exposed unit.
pub(super) fn histograms<'h, L: EncodeLabelSet>(
    d: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: impl IntoIterator<Item = (L, &'h Histogram<u64>)>,
    bounds: &[u64],
    per_unit: f64,
) -> fmt::Result {
    let mut m = d.encode_descriptor(name, help, None, MetricType::Histogram)?;
    for (labels, h) in series {
        let (buckets, sum) = buckets(h, bounds, per_unit);
        m.encode_family(&labels)?
            .encode_histogram::<NoLabelSet>(sum, h.len(), &buckets, None)?;
    }
    Ok(())
}

/// Per-bucket (not cumulative: the encoder adds them up) counts for each
/// bound, and the sum of the values, scaled by 1/`per_unit`. Values above
/// the last bound count only in `+Inf`, which the encoder adds as `h.len()`.
pub(super) fn buckets(h: &Histogram<u64>, bounds: &[u64], per_unit: f64) -> (Vec<(f64, u64)>, f64) {
    let mut counts = vec![0u64; bounds.len()];
    let mut sum = 0.0;
    for v in h.iter_recorded() {
        let value = v.value_iterated_to();
        sum += h.median_equivalent(value) as f64 * v.count_at_value() as f64;
        let low = h.lowest_equivalent(value);
        if let Some(i) = bounds.iter().position(|b| low <= *b) {
            counts[i] += v.count_at_value();
        }
    }
    let buckets = bounds.iter().map(|b| *b as f64 / per_unit).zip(counts);
    (buckets.collect(), sum / per_unit)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PHASE_BOUNDS_US: [u64; 19] = super::super::collect::PHASE_BOUNDS_US;

    #[test]
    fn buckets_take_values_at_their_bound_and_leave_the_rest_to_inf() {
        let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 2).unwrap();
        for v in [0, 250, 1_000, 1_000, 12_000_000] {
            h.record(v).unwrap();
        }
        let (b, sum) = buckets(&h, &PHASE_BOUNDS_US, 1e6);
        let count = |le: f64| b.iter().find(|(bound, _)| *bound == le).unwrap().1;
        assert_eq!((count(0.00001), count(0.00025), count(0.001)), (1, 1, 2));
        assert_eq!(b.iter().map(|(_, n)| n).sum::<u64>(), 4);
        assert!((sum - 12.00225).abs() < 0.12, "{sum}");
    }
}
