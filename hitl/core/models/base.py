"""The QuerySet every HITL model's manager starts from."""

from django.db import models


class QuerySet(models.QuerySet):
    def one_or_none(self):
        """The row of a query narrowed to at most one by a unique key, or None.

        `.first()` adds ORDER BY pk, and compiling that costs about as much as the rest
        of such a query (Django hashes each ordering expression's signature).
        """
        return next(iter(self[:1]), None)

    async def aone_or_none(self):
        async for row in self[:1]:
            return row
        return None
