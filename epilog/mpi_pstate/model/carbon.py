# SPDX-License-Identifier: BSD-3-Clause
"""Grams of CO2 from joules at the site's carbon_g_per_kwh= (its parser is
parse.carbon): one rule for `report`, its totals and the Prometheus
metrics.  Imported by the summaries' flusher: Python 3.6."""
from typing import Any, Dict, Optional, Tuple

J_PER_KWH = 3.6e6


def intensity(carbon: Tuple[Optional[float], Dict[str, float]], partition: str
              ) -> Optional[float]:
    """The g CO2/kWh a job's energy is counted at: its partition's figure,
    else the site's (carbon_g_per_kwh=); None when the site gives none."""
    site, parts = carbon
    return parts.get(partition, site)


def figures(s: Dict[str, Any], g: Optional[float]) -> Optional[Dict[str, Any]]:
    """Grams of CO2 spent (the energy measured) and saved (the estimate:
    est, low, high) at g per kWh, from a summary; None when neither is
    known."""
    if g is None:
        return None
    out = {"g_per_kwh": g}  # type: Dict[str, Any]
    if s.get("energy") in ("ok", "partial") and isinstance(s.get("energy_j"), (int, float)):
        out["spent_g"] = round(s["energy_j"] * g / J_PER_KWH, 3)
    sv = s.get("saved_j")
    if isinstance(sv, list) and len(sv) == 3:
        out["saved_g"] = [round(x * g / J_PER_KWH, 4) for x in sv]
    return out if len(out) > 1 else None
