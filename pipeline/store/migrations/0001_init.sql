-- 0001: the ledger tables, helper macros and views (see DESIGN.md "The ledger").
-- Forward-only: never edit this file once released; add 0002_*.sql instead.

CREATE TABLE problems (
    problem_id  VARCHAR PRIMARY KEY,          -- content hash of (question, answer, verifier)
    source      VARCHAR NOT NULL,             -- gen:<family> or file:<name>
    family      VARCHAR NOT NULL,
    level       INTEGER NOT NULL,
    params      JSON,
    question    VARCHAR NOT NULL,
    answer      VARCHAR NOT NULL,
    verifier    VARCHAR NOT NULL,
    split       VARCHAR NOT NULL CHECK (split IN ('train', 'heldout')),
    created_at  TIMESTAMPTZ NOT NULL
);

CREATE TABLE sampling_runs (
    run_id            VARCHAR PRIMARY KEY,
    purpose           VARCHAR NOT NULL CHECK (purpose IN ('screen', 'refine', 'train', 'eval')),
    model             VARCHAR NOT NULL,
    model_revision    VARCHAR NOT NULL,       -- hash of the weights
    backend           VARCHAR NOT NULL,
    group_size        INTEGER NOT NULL,
    temperature       DOUBLE,
    top_p             DOUBLE,
    max_new_tokens    INTEGER,
    seed              BIGINT,
    verifier_version  VARCHAR,
    started_at        TIMESTAMPTZ,
    finished_at       TIMESTAMPTZ,
    status            VARCHAR NOT NULL CHECK (status IN ('running', 'finished', 'failed', 'crashed'))
);

CREATE TABLE rollouts (
    run_id             VARCHAR NOT NULL,
    problem_id         VARCHAR NOT NULL,
    sample_idx         INTEGER NOT NULL,
    completion         VARCHAR,
    n_tokens           INTEGER,
    finish_reason      VARCHAR,               -- stop | length
    reward             DOUBLE,                -- NULL: the verifier failed (never silently 0)
    correct            BOOLEAN,
    reward_components  JSON
    -- natural key (run_id, problem_id, sample_idx), kept by the write path (see
    -- sieve_natural_keys): a primary-key index makes bulk ingest ~20x slower here.
);

CREATE TABLE curricula (
    curriculum_id   VARCHAR PRIMARY KEY,
    created_at      TIMESTAMPTZ NOT NULL,
    model           VARCHAR,
    model_revision  VARCHAR,
    config          JSON,
    status          VARCHAR NOT NULL DEFAULT 'finished'
);

CREATE TABLE curriculum_items (
    curriculum_id  VARCHAR NOT NULL,
    problem_id     VARCHAR NOT NULL,
    stage          INTEGER NOT NULL,
    position       INTEGER NOT NULL,
    group_size     INTEGER NOT NULL,
    weight         DOUBLE NOT NULL,
    p_mean         DOUBLE,
    p_low          DOUBLE,
    p_high         DOUBLE,
    reason         VARCHAR,
    PRIMARY KEY (curriculum_id, problem_id)
);

CREATE TABLE rejections (
    curriculum_id  VARCHAR NOT NULL,
    problem_id     VARCHAR NOT NULL,
    reason         VARCHAR NOT NULL,          -- all_correct | all_wrong | out_of_band | verifier_error | duplicate | heldout | skipped_by_history
    PRIMARY KEY (curriculum_id, problem_id)
);

CREATE TABLE train_runs (
    train_id        VARCHAR PRIMARY KEY,
    curriculum_id   VARCHAR,
    base_model      VARCHAR,
    base_revision   VARCHAR,
    config          JSON,
    started_at      TIMESTAMPTZ,
    finished_at     TIMESTAMPTZ,
    status          VARCHAR NOT NULL CHECK (status IN ('running', 'finished', 'failed', 'crashed'))
);

CREATE TABLE train_metrics (
    train_id  VARCHAR NOT NULL,
    step      INTEGER NOT NULL,
    name      VARCHAR NOT NULL,
    value     DOUBLE,
    PRIMARY KEY (train_id, step, name)
);

CREATE TABLE checkpoints (
    train_id        VARCHAR NOT NULL,
    step            INTEGER NOT NULL,
    path            VARCHAR NOT NULL,
    model_revision  VARCHAR NOT NULL,
    metrics         JSON,
    created_at      TIMESTAMPTZ,
    PRIMARY KEY (train_id, step)
);

-- The natural key of every table; writes deduplicate on it and skip (or replace) stored rows.
CREATE TABLE sieve_natural_keys (
    table_name   VARCHAR PRIMARY KEY,
    key_columns  VARCHAR[] NOT NULL
);

INSERT INTO sieve_natural_keys VALUES
    ('problems',         ['problem_id']),
    ('sampling_runs',    ['run_id']),
    ('rollouts',         ['run_id', 'problem_id', 'sample_idx']),
    ('curricula',        ['curriculum_id']),
    ('curriculum_items', ['curriculum_id', 'problem_id']),
    ('rejections',       ['curriculum_id', 'problem_id']),
    ('train_runs',       ['train_id']),
    ('train_metrics',    ['train_id', 'step', 'name']),
    ('checkpoints',      ['train_id', 'step']);

-- A group is uninformative ("zero variance") when max(r) - min(r) <= this tolerance.
-- grpo_core.advantages uses the same number; tests/store check that they agree.
CREATE MACRO sieve_zero_var_tol() AS 1e-6;

-- Quantile u of Beta(a, b) for a, b >= 1: exact closed forms when a = 1 or b = 1 (the 0/n and
-- n/n groups that matter most for screening), otherwise the approximation of Abramowitz &
-- Stegun 26.5.22 (absolute error < 0.005 against an exact inversion, see tests/store).
-- y is the standard normal quantile for the *upper* tail, so u = 0.05 uses y = +1.6449.
CREATE MACRO sieve_beta_h(a, b) AS 2 / (1 / (2 * a - 1) + 1 / (2 * b - 1));

CREATE MACRO sieve_beta_w(a, b, y, h) AS
    y * sqrt(h + (y * y - 3) / 6) / h
    - (1 / (2 * b - 1) - 1 / (2 * a - 1)) * ((y * y - 3) / 6 + 5 / 6 - 2 / (3 * h));

CREATE MACRO sieve_beta_q(a, b, u) AS
    CASE
        WHEN a = 1 THEN 1 - pow(1 - u, 1 / b)
        WHEN b = 1 THEN pow(u, 1 / a)
        ELSE a / (a + b * exp(2 * sieve_beta_w(
            a, b,
            CASE WHEN u < 0.5 THEN 1.6448536269514722 ELSE -1.6448536269514722 END,
            sieve_beta_h(a, b))))
    END;

-- One row per sampling run x problem: the group GRPO would see.
CREATE VIEW group_stats AS
SELECT
    r.run_id,
    r.problem_id,
    s.purpose,
    s.model_revision,
    count(*)                                         AS n_samples,
    count(r.reward)                                  AS n,
    count(*) FILTER (WHERE r.correct)                AS k,
    count(*) - count(r.reward)                       AS n_errors,
    count(*) FILTER (WHERE r.correct) / nullif(count(r.reward), 0) AS pass_rate,
    avg(r.reward)                                    AS reward_mean,
    stddev_pop(r.reward)                             AS reward_std,
    min(r.reward)                                    AS reward_min,
    max(r.reward)                                    AS reward_max,
    max(r.reward) - min(r.reward) <= sieve_zero_var_tol() AS zero_variance,
    avg(r.n_tokens)                                  AS mean_tokens,
    avg(CASE WHEN r.finish_reason = 'length' THEN 1.0 ELSE 0.0 END) AS truncated_share
FROM rollouts AS r
LEFT JOIN sampling_runs AS s USING (run_id)
GROUP BY r.run_id, r.problem_id, s.purpose, s.model_revision;

-- One row per problem x model revision, pooled over every sampled (temperature > 0) run.
-- Greedy runs are left out: their samples are not draws from the policy distribution.
CREATE VIEW prompt_stats AS
WITH pooled AS (
    SELECT
        r.problem_id,
        s.model_revision,
        count(DISTINCT r.run_id)                     AS n_runs,
        count(r.reward)                              AS n,
        count(*) FILTER (WHERE r.correct)            AS k,
        count(*) - count(r.reward)                   AS n_errors,
        avg(r.reward)                                AS reward_mean,
        stddev_pop(r.reward)                         AS reward_std,
        max(r.reward) - min(r.reward)                AS reward_range,
        max(coalesce(s.finished_at, s.started_at))   AS last_seen
    FROM rollouts AS r
    JOIN sampling_runs AS s USING (run_id)
    WHERE coalesce(s.temperature, 1.0) > 0
    GROUP BY r.problem_id, s.model_revision
), posterior AS (
    SELECT *, 1.0 + k AS alpha, 1.0 + n - k AS beta FROM pooled
)
SELECT
    problem_id,
    model_revision,
    n_runs,
    n,
    k,
    n_errors,
    k / nullif(n, 0)                                 AS pass_rate,
    reward_mean,
    reward_std,
    alpha / (alpha + beta)                           AS p_mean,
    sieve_beta_q(alpha, beta, 0.05)                  AS p_low,
    sieve_beta_q(alpha, beta, 0.95)                  AS p_high,
    alpha * beta / ((alpha + beta) * (alpha + beta + 1)) AS learnability,
    reward_range <= sieve_zero_var_tol()             AS zero_variance,
    last_seen
FROM posterior;

-- Pass rate by family x level for each model revision.
CREATE VIEW difficulty_by_family AS
SELECT
    p.family,
    p.level,
    ps.model_revision,
    count(*)                                         AS n_problems,
    sum(ps.n)                                        AS n_samples,
    sum(ps.k) / nullif(sum(ps.n), 0)                 AS pass_rate,
    avg(ps.pass_rate)                                AS mean_problem_pass_rate,
    avg(CASE WHEN ps.k = ps.n THEN 1.0 ELSE 0.0 END) AS solve_all_share,
    avg(CASE WHEN ps.k = 0 THEN 1.0 ELSE 0.0 END)    AS solve_none_share,
    avg(CASE WHEN ps.zero_variance THEN 0.0 ELSE 1.0 END) AS informative_share
FROM prompt_stats AS ps
JOIN problems AS p USING (problem_id)
WHERE ps.n > 0
GROUP BY p.family, p.level, ps.model_revision;

-- One row per sampling run: how much of its compute landed on informative groups.
CREATE VIEW run_summary AS
WITH binned AS (
    SELECT *, least(floor(pass_rate * 10), 9)::INTEGER AS bin FROM group_stats
)
SELECT
    s.run_id,
    s.purpose,
    s.model_revision,
    s.group_size,
    s.status,
    s.started_at,
    s.finished_at,
    count(g.problem_id)                              AS n_problems,
    coalesce(sum(g.n_samples), 0)                    AS n_rollouts,
    coalesce(sum(g.n_errors), 0)                     AS n_verifier_errors,
    avg(g.pass_rate)                                 AS mean_pass_rate,
    avg(CASE WHEN g.k = g.n THEN 1.0 ELSE 0.0 END)   AS solve_all_share,
    avg(CASE WHEN g.k = 0 THEN 1.0 ELSE 0.0 END)     AS solve_none_share,
    avg(CASE WHEN g.zero_variance THEN 0.0 ELSE 1.0 END) AS informative_share,
    -- groups counted by pass rate in ten bins [0, 0.1), [0.1, 0.2), ..., [0.9, 1.0]
    [count(*) FILTER (WHERE g.bin = 0), count(*) FILTER (WHERE g.bin = 1),
     count(*) FILTER (WHERE g.bin = 2), count(*) FILTER (WHERE g.bin = 3),
     count(*) FILTER (WHERE g.bin = 4), count(*) FILTER (WHERE g.bin = 5),
     count(*) FILTER (WHERE g.bin = 6), count(*) FILTER (WHERE g.bin = 7),
     count(*) FILTER (WHERE g.bin = 8), count(*) FILTER (WHERE g.bin = 9)] AS pass_rate_histogram
FROM sampling_runs AS s
LEFT JOIN binned AS g USING (run_id)
GROUP BY s.run_id, s.purpose, s.model_revision, s.group_size, s.status, s.started_at,
    s.finished_at;

-- One row per curriculum x stage, with the rejection count beside it.
CREATE VIEW curriculum_summary AS
WITH rejected AS (
    SELECT curriculum_id, count(*) AS n_rejected FROM rejections GROUP BY curriculum_id
)
SELECT
    i.curriculum_id,
    i.stage,
    count(*)                                         AS n_items,
    sum(i.group_size)                                AS rollouts_per_epoch,
    avg(i.group_size)                                AS mean_group_size,
    sum(i.weight)                                    AS total_weight,
    avg(i.p_mean)                                    AS mean_p,
    min(i.p_low)                                     AS min_p_low,
    max(i.p_high)                                    AS max_p_high,
    coalesce(any_value(r.n_rejected), 0)             AS n_rejected_in_curriculum
FROM curriculum_items AS i
LEFT JOIN rejected AS r USING (curriculum_id)
GROUP BY i.curriculum_id, i.stage;
