-- The newest curriculum with at least one item (ties broken by id, so `latest` is
-- deterministic): a curation that kept nothing is recorded, but is never `latest`.
SELECT c.curriculum_id
FROM curricula AS c
WHERE EXISTS (SELECT 1 FROM curriculum_items AS i WHERE i.curriculum_id = c.curriculum_id)
ORDER BY c.created_at DESC, c.curriculum_id DESC
LIMIT 1
