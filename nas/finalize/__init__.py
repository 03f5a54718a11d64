"""``hwnas finalize runs/<study>``: prune -> distill-train with DDP -> re-measure -> export.

For each of the top-K exported Pareto models (``runs/<study>/pareto/*/model.pt``):

1. **measure before**: static costs, digital accuracy, and accuracy under the study's hardware
   models and drift times with the study's protocol (``nas.scoring.glue.hw_accuracy``: repeats,
   compensation, HWA epochs);
2. **prune** (``compress.prune``) to a channel ratio, a MACs budget or a measured-latency budget;
3. **train** on the study's data (whole train split unless limited) with ``train.ddp``: in this
   process, under ``torchrun`` (``nproc`` > 1) or on Ray Train workers; with ``distill`` the loss
   is Hinton KD from the teacher (the most accurate Pareto model, or a given checkpoint);
4. for analog hardware, **HWA fine-tuning** (with distillation when asked), kept in the weights;
5. **measure after** with the same protocol; the latency of before and after is timed side by
   side, interleaved in one run on the study's latency settings and deployed form
   (``hw_cost.compare``), so both figures share the host's load; unsteady figures are flagged;
6. **export** like ``hwnas export`` into ``runs/<study>/final/<arch>/`` with a before/after table
   (units, spreads, warnings, and where an accuracy change comes from) in the model card; every
   model's figures also go to ``runs/<study>/final/summary.json`` for the study report, with
   what ran (``ran``: processes, pruned ratio, epochs, batch-norm and AdaBS images, programmings).

Between 4 and 5, after pruning or any training shorter than an epoch (or ``SETTLED_STEPS``
steps), the batch norms' statistics are **re-estimated** on training images
(``reestimate_bn``): the trained running statistics describe the unpruned model, or lag
weights that moved within fewer steps than their momentum averages over, and the digital score
would read them as they are (the analog score re-estimates its own through AdaBS). The
accuracy table labels its spreads as the Pareto tables do: ``± SE`` with the programmings or
images behind it.

The default teacher is the most accurate exported model on the validation images the
"before" figures use, measured now (the unpruned student is among the candidates), so it is
never weaker than its student.
"""

from __future__ import annotations

from nas.finalize.bn import SETTLED_STEPS, bn_images, bn_note, reestimate_bn, stale_bn
from nas.finalize.config import BACKENDS, FinalizeConfig, asked, pareto_models, study_config
from nas.finalize.measure import measure, pick_teacher, prune_measure, side_by_side, val_split
from nas.finalize.steps import finalize, finalize_one, what_ran
from nas.finalize.tables import LEGEND, before_after, cell, ratio_cell, table_markdown

__all__ = ["BACKENDS", "LEGEND", "SETTLED_STEPS", "FinalizeConfig", "asked", "before_after",
           "bn_images", "bn_note", "cell", "finalize", "finalize_one", "measure", "pareto_models",
           "pick_teacher", "prune_measure", "ratio_cell", "reestimate_bn", "side_by_side",
           "stale_bn", "study_config", "table_markdown", "val_split", "what_ran"]
