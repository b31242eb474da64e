-- 0010: training rollouts (pipeline/train.py): every completion a training step sampled, with its
-- reward, verdict and the policy it was sampled from. A table of its own, not `rollouts` with a
-- source label: a training run's weights change every step, so its rows belong to no one model
-- revision, and `prompt_stats` / `difficulty_by_family` (per model revision, over `rollouts`)
-- stay exactly as they were. Forward-only: never edit this file once released.

CREATE TABLE train_rollouts (
    train_id           VARCHAR NOT NULL,
    step               INTEGER NOT NULL,      -- the optimiser step that sampled and trained on it
    problem_id         VARCHAR NOT NULL,
    sample_idx         INTEGER NOT NULL,      -- within (train_id, step, problem_id), in draw order
    policy             VARCHAR NOT NULL,      -- model_revision of the sampling weights when a
                                              -- checkpoint (or the base) holds them, else
                                              -- '<train_id>@<step>'
    completion         VARCHAR,
    n_tokens           INTEGER,
    finish_reason      VARCHAR,               -- stop | length
    reward             DOUBLE,                -- NULL: the verifier failed (never silently 0)
    correct            BOOLEAN,
    behaviour_logprob  DOUBLE                 -- the sampling engine's summed log-prob of the
                                              -- completion tokens; NULL when it reports none
    -- natural key (train_id, step, problem_id, sample_idx), kept by the write path (replace on
    -- a resumed step): no index, for bulk ingest speed, like rollouts.
);

INSERT INTO sieve_natural_keys VALUES
    ('train_rollouts', ['train_id', 'step', 'problem_id', 'sample_idx']);

-- One row per training run x step x problem: the group the trainer saw (zero variance by the
-- trainer's rule, max - min <= sieve_zero_var_tol(), as group_stats).
CREATE VIEW train_group_stats AS
SELECT
    train_id,
    step,
    problem_id,
    any_value(policy)                                AS policy,
    count(*)                                         AS n_samples,
    count(reward)                                    AS n,
    count(*) FILTER (WHERE correct)                  AS k,
    count(*) FILTER (WHERE correct) / nullif(count(reward), 0) AS pass_rate,
    avg(reward)                                      AS reward_mean,
    stddev_pop(reward)                               AS reward_std,
    NOT (max(reward) - min(reward) <= sieve_zero_var_tol()) AS informative
FROM train_rollouts
GROUP BY train_id, step, problem_id;

-- One row per training run x problem: how its pass rate moved over the steps that drew it.
CREATE VIEW train_prompt_trajectory AS
SELECT
    train_id,
    problem_id,
    count(*)                                         AS steps_drawn,
    min(step)                                        AS first_step,
    max(step)                                        AS last_step,
    list(pass_rate ORDER BY step)                    AS pass_rate_by_step,
    list(step ORDER BY step)                         AS steps,
    arg_min(pass_rate, step)                         AS first_pass_rate,
    arg_max(pass_rate, step)                         AS last_pass_rate,
    min(step) FILTER (WHERE k > 0)                   AS first_step_solved,
    count(*) FILTER (WHERE NOT coalesce(informative, false)) AS steps_zero_variance
FROM train_group_stats
GROUP BY train_id, problem_id;
