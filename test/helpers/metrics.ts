// Reading one series out of a Prometheus text exposition (GET /metrics).

/** The value of the series named exactly `series` (name and labels as printed), undefined if absent. */
export function metricValue (text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `))
  return line === undefined ? undefined : Number(line.slice(series.length + 1))
}
