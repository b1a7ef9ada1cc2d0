"""What the bridge tells an operator about itself while it runs: Prometheus metrics, OpenTelemetry traces and the
JSON log, behind one narrow seam.

``metrics.py`` defines every metric once (its name, help, unit, buckets and label set, and the closed sets of
values its labels may take); ``seam.py`` is what the rest of the bridge calls when something happens (a call
ended, a sandbox started, a session closed, an upstream tool answered), a ``Telemetry`` that does nothing when
metrics are off and records into one bridge's own registry when they are on; ``snapshot.py`` reads what is
counted by looking (live sessions, the warm pool, each upstream server's state) only when Prometheus scrapes. No
label value ever comes from a session name, a principal, the code or its arguments: the labels are closed sets or
names the operator configured (servers) and their servers listed (tools). ``Telemetry.tracing`` opens the spans
(``tracing.py``, the seam that does nothing when tracing is off; ``otel_tracing.py``, OpenTelemetry's SDK, imported
only when it is on), under the same rule for what they may hold; ``logs.py`` writes the log as JSON lines joined to
the audit log and the traces by the call id, and keeps every known secret out of every line. It is core: it imports
nothing of the bridge above it, so the run service, the policy's guard and the face may all call it.
"""
