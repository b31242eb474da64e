-- Problems by family x level and split.
SELECT
    family,
    level,
    count(*) AS problems,
    count(*) FILTER (WHERE split = 'train') AS train,
    count(*) FILTER (WHERE split = 'heldout') AS heldout
FROM problems
GROUP BY family, level
ORDER BY family, level
