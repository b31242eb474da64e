-- The difficulty model of pipeline/selection/posterior.py in SQL, for every train-split problem:
-- its cell's yield and its Beta(alpha, beta) pass-rate posterior at update $now, from the groups
-- training run $train has seen (train_group_stats; a skip observes nothing). Each group weighs
-- $decay^($now - step) * least(1, $cap / n); a cell's yield shrinks to the pooled yield with
-- $cell_strength pseudo-samples and stays in [$floor, 1 - $floor]; an unseen prompt starts at
-- Beta($strength * yield, $strength * (1 - yield)). tests/selection/test_posterior.py holds it to
-- the Python within 1e-12.
WITH obs AS (
    SELECT
        g.problem_id,
        p.family || ' ' || p.level AS cell,
        pow($decay, $now - g.step) * least(1.0, $cap / g.n) AS w,
        g.k::DOUBLE AS k,
        g.n::DOUBLE AS n
    FROM train_group_stats AS g
    JOIN problems AS p USING (problem_id)
    WHERE g.train_id = $train AND g.n > 0 AND NOT g.skipped
),
weighted AS (
    SELECT problem_id, cell, w * k AS wk, w * n AS wn FROM obs
),
pooled AS (
    SELECT (coalesce(sum(wk), 0) + 1.0) / (coalesce(sum(wn), 0) + 2.0) AS m FROM weighted
),
cells AS (
    SELECT
        cell,
        greatest($floor, least(1.0 - $floor,
            (sum(wk) + $cell_strength * (SELECT m FROM pooled)) / (sum(wn) + $cell_strength)
        )) AS cell_yield
    FROM weighted
    GROUP BY cell
),
mine AS (
    SELECT problem_id, sum(wk) AS pk, sum(wn) AS pn FROM weighted GROUP BY problem_id
),
prompts AS (
    SELECT
        pr.problem_id,
        pr.family || ' ' || pr.level AS cell,
        coalesce(c.cell_yield, greatest($floor, least(1.0 - $floor, (SELECT m FROM pooled))))
            AS cell_yield,
        coalesce(m.pk, 0.0) AS pk,
        coalesce(m.pn, 0.0) AS pn
    FROM problems AS pr
    LEFT JOIN cells AS c ON c.cell = pr.family || ' ' || pr.level
    LEFT JOIN mine AS m USING (problem_id)
    WHERE pr.split = 'train'
)
SELECT
    problem_id,
    cell,
    cell_yield,
    $strength * cell_yield + pk AS alpha,
    $strength * (1.0 - cell_yield) + pn - pk AS beta,
    ($strength * cell_yield + pk) / ($strength + pn) AS mean
FROM prompts
ORDER BY problem_id
