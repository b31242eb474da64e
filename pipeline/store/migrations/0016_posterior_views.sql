-- 0016: the difficulty model over the whole ledger (issue 46 point 1): views posterior_clock,
-- posterior_observations, cell_posterior and prompt_posterior, at PosteriorConfig's defaults
-- (the sieve_posterior_* macros; tests/selection/test_posterior_views.py holds them to the
-- dataclass and the views to pipeline/selection/posterior.py's ledger_posterior within 1e-12).
--
-- Evidence is every scored group of a train-split problem: curation groups (screen and refine
-- runs sampled at temperature > 0) and training groups (train_group_stats; a skip observes
-- nothing). Its age is counted in optimizer updates on one clock through the lineage: a
-- training run starts at the clock of the checkpoint it trains from (0 for weights no
-- checkpoint of this ledger holds: a base model), its group of step s is at start + s and its
-- checkpoint of step c at start + c; a curation run sits at the clock of the weights it sampled
-- (0 for a base). `now` is the newest clock. Forward-only: never edit this file once released.

CREATE OR REPLACE MACRO sieve_posterior_decay() AS 0.9e0;
CREATE OR REPLACE MACRO sieve_posterior_cap() AS 8.0e0;
CREATE OR REPLACE MACRO sieve_posterior_strength() AS 4.0e0;
CREATE OR REPLACE MACRO sieve_posterior_cell_strength() AS 8.0e0;
CREATE OR REPLACE MACRO sieve_posterior_floor() AS 0.02e0;

-- one row per training run: the clock of the weights it started from
CREATE OR REPLACE VIEW posterior_clock AS
WITH RECURSIVE chain(train_id, start, depth) AS (
    SELECT t.train_id, 0::BIGINT, 0
    FROM train_runs AS t
    WHERE t.base_revision IS NULL
       OR t.base_revision NOT IN (SELECT model_revision FROM checkpoints)
    UNION ALL
    SELECT t.train_id, c.start + k.step, c.depth + 1
    FROM chain AS c
    JOIN checkpoints AS k ON k.train_id = c.train_id
    JOIN train_runs AS t ON t.base_revision = k.model_revision
    WHERE c.depth < 1000
)
SELECT train_id, min(start) AS start FROM chain GROUP BY train_id;

CREATE OR REPLACE VIEW posterior_observations AS
WITH revisions AS (
    SELECT k.model_revision, min(c.start + k.step) AS clock
    FROM checkpoints AS k
    JOIN posterior_clock AS c USING (train_id)
    GROUP BY k.model_revision
)
SELECT
    g.problem_id,
    p.family || ' ' || p.level AS cell,
    g.k::DOUBLE AS k,
    g.n::DOUBLE AS n,
    coalesce(v.clock, 0)::BIGINT AS update,
    s.purpose AS source
FROM group_stats AS g
JOIN sampling_runs AS s USING (run_id)
JOIN problems AS p USING (problem_id)
LEFT JOIN revisions AS v ON v.model_revision = s.model_revision
WHERE s.purpose IN ('screen', 'refine') AND coalesce(s.temperature, 1.0) > 0
  AND g.n > 0 AND p.split = 'train'
UNION ALL
SELECT
    t.problem_id,
    p.family || ' ' || p.level,
    t.k::DOUBLE,
    t.n::DOUBLE,
    (coalesce(c.start, 0) + t.step)::BIGINT,
    'train'
FROM train_group_stats AS t
JOIN problems AS p USING (problem_id)
LEFT JOIN posterior_clock AS c USING (train_id)
WHERE t.n > 0 AND NOT t.skipped AND p.split = 'train';

-- each view reads the evidence once (MATERIALIZED): a view named twice in a query is expanded
-- twice, and the evidence is an aggregate over every sample the ledger holds
CREATE OR REPLACE VIEW posterior_weighted AS
WITH o AS MATERIALIZED (
    SELECT * FROM posterior_observations
),
now_ AS (
    SELECT greatest(
        coalesce((SELECT max(update) FROM o), 0),
        coalesce((SELECT max(c.start + k.step) FROM checkpoints AS k
                  JOIN posterior_clock AS c USING (train_id)), 0)
    ) AS now
)
SELECT
    o.*,
    n.now,
    pow(sieve_posterior_decay(), n.now - o.update) * least(1.0, sieve_posterior_cap() / o.n) AS w
FROM o, now_ AS n;

-- one row per cell (family level) with evidence: weighted samples, weighted correct, its yield
CREATE OR REPLACE VIEW cell_posterior AS
WITH w AS MATERIALIZED (
    SELECT * FROM posterior_weighted
),
pooled AS (
    SELECT (coalesce(sum(w * k), 0) + 1.0) / (coalesce(sum(w * n), 0) + 2.0) AS m FROM w
)
SELECT
    cell,
    sum(w * k) AS weighted_correct,
    sum(w * n) AS weighted_samples,
    count(*) AS groups,
    greatest(sieve_posterior_floor(), least(1.0 - sieve_posterior_floor(),
        (sum(w * k) + sieve_posterior_cell_strength() * (SELECT m FROM pooled))
            / (sum(w * n) + sieve_posterior_cell_strength())
    )) AS cell_yield,
    max(now) AS now
FROM w
GROUP BY cell;

-- one row per train-split problem, observed or not: Beta(alpha, beta) of its pass rate now
CREATE OR REPLACE VIEW prompt_posterior AS
WITH w AS MATERIALIZED (
    SELECT * FROM posterior_weighted
),
pooled AS (
    SELECT (coalesce(sum(w * k), 0) + 1.0) / (coalesce(sum(w * n), 0) + 2.0) AS m FROM w
),
cells AS (
    SELECT
        cell,
        greatest(sieve_posterior_floor(), least(1.0 - sieve_posterior_floor(),
            (sum(w * k) + sieve_posterior_cell_strength() * (SELECT m FROM pooled))
                / (sum(w * n) + sieve_posterior_cell_strength())
        )) AS cell_yield
    FROM w
    GROUP BY cell
),
mine AS (
    SELECT problem_id, sum(w * k) AS pk, sum(w * n) AS pn, count(*) AS groups
    FROM w
    GROUP BY problem_id
),
prompts AS (
    SELECT
        pr.problem_id,
        pr.family || ' ' || pr.level AS cell,
        coalesce(c.cell_yield, greatest(sieve_posterior_floor(),
            least(1.0 - sieve_posterior_floor(), (SELECT m FROM pooled)))) AS cell_yield,
        coalesce(m.pk, 0.0) AS pk,
        coalesce(m.pn, 0.0) AS pn,
        coalesce(m.groups, 0) AS groups
    FROM problems AS pr
    LEFT JOIN cells AS c ON c.cell = pr.family || ' ' || pr.level
    LEFT JOIN mine AS m USING (problem_id)
    WHERE pr.split = 'train'
)
SELECT
    problem_id,
    cell,
    groups,
    cell_yield,
    sieve_posterior_strength() * cell_yield + pk AS alpha,
    sieve_posterior_strength() * (1.0 - cell_yield) + pn - pk AS beta,
    (sieve_posterior_strength() * cell_yield + pk) / (sieve_posterior_strength() + pn) AS mean
FROM prompts;
