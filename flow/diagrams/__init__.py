"""A run's flow as Mermaid diagrams (seed 003): sequence and state diagram text, built from the
recorded rows, drawn on the run's admin page by the vendored Mermaid library, downloadable."""

from flow.diagrams.mermaid import label, sequence_diagram, state_diagram
from flow.diagrams.records import FlowRecord, flow_record

__all__ = ["FlowRecord", "flow_record", "label", "sequence_diagram", "state_diagram"]
